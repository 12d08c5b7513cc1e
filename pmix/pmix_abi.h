/*
 * The part of PMIx's ABI (pmix_common.h, PMIx v4) that gocoll uses,
 * declared here so that gocoll builds without libpmix-dev; everything is
 * prefixed gc_ so that abi_test.go can include this next to the real
 * header and compare sizes, offsets and constants.
 */
#ifndef GOCOLL_PMIX_ABI_H
#define GOCOLL_PMIX_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define GC_PMIX_MAX_NSLEN 255
#define GC_PMIX_MAX_KEYLEN 511

typedef int gc_pmix_status_t;
typedef uint32_t gc_pmix_rank_t;
typedef uint16_t gc_pmix_data_type_t;
typedef uint8_t gc_pmix_scope_t;

#define GC_PMIX_RANK_WILDCARD (UINT32_MAX - 1)

#define GC_PMIX_SUCCESS 0
#define GC_PMIX_ERR_NOT_FOUND (-46)

#define GC_PMIX_GLOBAL 3

/* Data types. */
#define GC_PMIX_BOOL 1
#define GC_PMIX_STRING 3
#define GC_PMIX_SIZE 4
#define GC_PMIX_INT 6
#define GC_PMIX_INT8 7
#define GC_PMIX_INT16 8
#define GC_PMIX_INT32 9
#define GC_PMIX_INT64 10
#define GC_PMIX_UINT 11
#define GC_PMIX_UINT8 12
#define GC_PMIX_UINT16 13
#define GC_PMIX_UINT32 14
#define GC_PMIX_UINT64 15
#define GC_PMIX_BYTE_OBJECT 27
#define GC_PMIX_PROC_RANK 40

/* Keys. */
#define GC_PMIX_JOB_SIZE "pmix.job.size"
#define GC_PMIX_NODEID "pmix.nodeid"
#define GC_PMIX_HOSTNAME "pmix.hname"
#define GC_PMIX_COLLECT_DATA "pmix.collect"
#define GC_PMIX_OPTIONAL "pmix.optional"

typedef struct {
    char nspace[GC_PMIX_MAX_NSLEN + 1];
    gc_pmix_rank_t rank;
} gc_pmix_proc_t;

typedef struct {
    char *bytes;
    size_t size;
} gc_pmix_byte_object_t;

typedef struct {
    gc_pmix_data_type_t type;
    union {
        bool flag;
        char *string;
        size_t size;
        int integer;
        int8_t int8;
        int16_t int16;
        int32_t int32;
        int64_t int64;
        unsigned int uint;
        uint8_t uint8;
        uint16_t uint16;
        uint32_t uint32;
        uint64_t uint64;
        gc_pmix_rank_t rank;
        gc_pmix_byte_object_t bo;
        /* The largest member, pmix_envar_t, which sets the union's size. */
        struct {
            char *envar, *value;
            char separator;
        } envar;
    } data;
} gc_pmix_value_t;

typedef struct {
    char key[GC_PMIX_MAX_KEYLEN + 1];
    uint32_t flags;
    gc_pmix_value_t value;
} gc_pmix_info_t;

#endif
