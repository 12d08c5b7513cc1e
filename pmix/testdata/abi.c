/*
 * Compiled by abi_test.go against the real PMIx header: compares every
 * size, offset and constant that pmix_abi.h declares with PMIx's own,
 * prints each mismatch and exits 1 if there is any.
 */
#include <pmix.h>
#include <stdio.h>
#include <string.h>
#include "pmix_abi.h"

static int bad;

static void num(const char *what, long long ours, long long theirs) {
    if (ours != theirs) {
        printf("%s: pmix_abi.h has %lld, pmix.h %lld\n", what, ours, theirs);
        bad = 1;
    }
}

static void str(const char *what, const char *ours, const char *theirs) {
    if (strcmp(ours, theirs) != 0) {
        printf("%s: pmix_abi.h has \"%s\", pmix.h \"%s\"\n", what, ours, theirs);
        bad = 1;
    }
}

#define SAME(x) num(#x, GC_##x, x)
#define SAMESTR(x) str(#x, GC_##x, x)
#define SIZE(t) num("sizeof " #t, sizeof(gc_##t), sizeof(t))
#define OFF(t, f) num("offsetof " #t "." #f, offsetof(gc_##t, f), offsetof(t, f))
#define MEMBER(t, f) num("sizeof " #t "." #f, sizeof(((gc_##t *)0)->f), sizeof(((t *)0)->f))

int main(void) {
    SAME(PMIX_MAX_NSLEN);
    SAME(PMIX_MAX_KEYLEN);
    SAME(PMIX_RANK_WILDCARD);
    SAME(PMIX_SUCCESS);
    SAME(PMIX_ERR_NOT_FOUND);
    SAME(PMIX_GLOBAL);
    SAME(PMIX_BOOL);
    SAME(PMIX_STRING);
    SAME(PMIX_SIZE);
    SAME(PMIX_INT);
    SAME(PMIX_INT8);
    SAME(PMIX_INT16);
    SAME(PMIX_INT32);
    SAME(PMIX_INT64);
    SAME(PMIX_UINT);
    SAME(PMIX_UINT8);
    SAME(PMIX_UINT16);
    SAME(PMIX_UINT32);
    SAME(PMIX_UINT64);
    SAME(PMIX_BYTE_OBJECT);
    SAME(PMIX_PROC_RANK);
    SAMESTR(PMIX_JOB_SIZE);
    SAMESTR(PMIX_NODEID);
    SAMESTR(PMIX_HOSTNAME);
    SAMESTR(PMIX_COLLECT_DATA);
    SAMESTR(PMIX_OPTIONAL);

    SIZE(pmix_status_t);
    SIZE(pmix_rank_t);
    SIZE(pmix_data_type_t);
    SIZE(pmix_scope_t);
    SIZE(pmix_proc_t);
    OFF(pmix_proc_t, nspace);
    OFF(pmix_proc_t, rank);
    SIZE(pmix_byte_object_t);
    OFF(pmix_byte_object_t, bytes);
    OFF(pmix_byte_object_t, size);
    SIZE(pmix_value_t);
    OFF(pmix_value_t, type);
    OFF(pmix_value_t, data);
    MEMBER(pmix_value_t, data);
    MEMBER(pmix_value_t, data.flag);
    MEMBER(pmix_value_t, data.size);
    MEMBER(pmix_value_t, data.integer);
    MEMBER(pmix_value_t, data.uint);
    MEMBER(pmix_value_t, data.uint32);
    MEMBER(pmix_value_t, data.uint64);
    MEMBER(pmix_value_t, data.rank);
    MEMBER(pmix_value_t, data.bo);
    MEMBER(pmix_value_t, data.envar);
    SIZE(pmix_info_t);
    OFF(pmix_info_t, key);
    OFF(pmix_info_t, flags);
    OFF(pmix_info_t, value);
    MEMBER(pmix_info_t, flags);
    if (!bad) printf("ABI OK\n");
    return bad;
}
