/* Calls into libpmix.so.2 through pointers found with dlsym (pmix_dl.c). */
#ifndef GOCOLL_PMIX_DL_H
#define GOCOLL_PMIX_DL_H

#include "pmix_abi.h"

int gocoll_pmix_load(const char *name, char *err, int errlen);
const char *gocoll_pmix_error_string(gc_pmix_status_t status);
const char *gocoll_pmix_version(void);

gc_pmix_status_t gocoll_pmix_init(gc_pmix_proc_t *me);
gc_pmix_status_t gocoll_pmix_finalize(void);
gc_pmix_status_t gocoll_pmix_abort(int code, const char *msg);
gc_pmix_status_t gocoll_pmix_put_bytes(const char *key, const void *data, size_t n);
gc_pmix_status_t gocoll_pmix_commit(void);
gc_pmix_status_t gocoll_pmix_fence_collect(const gc_pmix_proc_t *all);
gc_pmix_status_t gocoll_pmix_get(const gc_pmix_proc_t *proc, const char *key, int local_only, gc_pmix_value_t **val);

int gocoll_pmix_value_int(const gc_pmix_value_t *v, long long *out);
const char *gocoll_pmix_value_string(const gc_pmix_value_t *v);
int gocoll_pmix_value_bytes(const gc_pmix_value_t *v, const char **p, size_t *n);
void gocoll_pmix_value_release(gc_pmix_value_t *v);

#endif
