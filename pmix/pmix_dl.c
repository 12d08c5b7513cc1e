//go:build cgo

/*
 * Loads the PMIx client library (libpmix.so.2) with dlopen and calls it
 * through function pointers, so that gocoll needs no PMIx at build time and
 * a machine without it only sees dlopen fail. Each wrapper is one call, or
 * one call with the pmix_info_t it needs built on the stack; the Go side
 * (client.go) turns statuses into errors.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pmix_dl.h"

static struct {
    gc_pmix_status_t (*Init)(gc_pmix_proc_t *, gc_pmix_info_t *, size_t);
    gc_pmix_status_t (*Finalize)(const gc_pmix_info_t *, size_t);
    gc_pmix_status_t (*Abort)(int, const char *, gc_pmix_proc_t *, size_t);
    gc_pmix_status_t (*Put)(gc_pmix_scope_t, const char *, gc_pmix_value_t *);
    gc_pmix_status_t (*Commit)(void);
    gc_pmix_status_t (*Fence)(const gc_pmix_proc_t *, size_t, const gc_pmix_info_t *, size_t);
    gc_pmix_status_t (*Get)(const gc_pmix_proc_t *, const char *, const gc_pmix_info_t *, size_t,
                            gc_pmix_value_t **);
    const char *(*Error_string)(gc_pmix_status_t);
    const char *(*Get_version)(void);
    void (*Value_destruct)(gc_pmix_value_t *);
} px;

static const struct sym {
    void **fn;
    const char *name;
} syms[] = {
    {(void **)&px.Init, "PMIx_Init"},
    {(void **)&px.Finalize, "PMIx_Finalize"},
    {(void **)&px.Abort, "PMIx_Abort"},
    {(void **)&px.Put, "PMIx_Put"},
    {(void **)&px.Commit, "PMIx_Commit"},
    {(void **)&px.Fence, "PMIx_Fence"},
    {(void **)&px.Get, "PMIx_Get"},
    {(void **)&px.Error_string, "PMIx_Error_string"},
    {(void **)&px.Get_version, "PMIx_Get_version"},
    {(void **)&px.Value_destruct, "PMIx_Value_destruct"},
};

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static void *handle;

/* gocoll_pmix_load opens name and finds every entry point, or writes why
 * not to err. Once a library is loaded it stays: a later call only checks
 * that name can be opened too. RTLD_GLOBAL because libpmix's own plugins
 * (pmix_mca_*.so) resolve their references to it by name. */
int gocoll_pmix_load(const char *name, char *err, int errlen) {
    void *h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(err, errlen, "pmix: cannot load %s: %s", name, e ? e : "unknown error");
        return -1;
    }
    pthread_mutex_lock(&load_mu);
    if (handle != NULL) {
        pthread_mutex_unlock(&load_mu);
        dlclose(h);
        return 0;
    }
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(h, syms[i].name);
        if (f == NULL) {
            snprintf(err, errlen, "pmix: %s has no %s: is it PMIx v4 or later?", name, syms[i].name);
            memset(&px, 0, sizeof px);
            pthread_mutex_unlock(&load_mu);
            dlclose(h);
            return -1;
        }
        *syms[i].fn = f;
    }
    handle = h;
    pthread_mutex_unlock(&load_mu);
    return 0;
}

const char *gocoll_pmix_error_string(gc_pmix_status_t status) { return px.Error_string(status); }
const char *gocoll_pmix_version(void) { return px.Get_version(); }

gc_pmix_status_t gocoll_pmix_init(gc_pmix_proc_t *me) { return px.Init(me, NULL, 0); }
gc_pmix_status_t gocoll_pmix_finalize(void) { return px.Finalize(NULL, 0); }
gc_pmix_status_t gocoll_pmix_abort(int code, const char *msg) { return px.Abort(code, msg, NULL, 0); }

/* PMIx_Put copies the value, so data may be the caller's memory. */
gc_pmix_status_t gocoll_pmix_put_bytes(const char *key, const void *data, size_t n) {
    gc_pmix_value_t v;
    memset(&v, 0, sizeof v);
    v.type = GC_PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)data;
    v.data.bo.size = n;
    return px.Put(GC_PMIX_GLOBAL, key, &v);
}

gc_pmix_status_t gocoll_pmix_commit(void) { return px.Commit(); }

static void bool_info(gc_pmix_info_t *info, const char *key) {
    memset(info, 0, sizeof *info);
    strncpy(info->key, key, GC_PMIX_MAX_KEYLEN);
    info->value.type = GC_PMIX_BOOL;
    info->value.data.flag = true;
}

/* A fence over all, with PMIX_COLLECT_DATA: every rank's committed values
 * come back with its release, into the local store that later gets read. */
gc_pmix_status_t gocoll_pmix_fence_collect(const gc_pmix_proc_t *all) {
    gc_pmix_info_t info;
    bool_info(&info, GC_PMIX_COLLECT_DATA);
    return px.Fence(all, 1, &info, 1);
}

/* With local_only, PMIX_OPTIONAL: look in the local store only, and return
 * PMIX_ERR_NOT_FOUND rather than ask the server. */
gc_pmix_status_t gocoll_pmix_get(const gc_pmix_proc_t *proc, const char *key, int local_only,
                                 gc_pmix_value_t **val) {
    gc_pmix_info_t info;
    if (!local_only) return px.Get(proc, key, NULL, 0, val);
    bool_info(&info, GC_PMIX_OPTIONAL);
    return px.Get(proc, key, &info, 1, val);
}

/* gocoll_pmix_value_int reads an integer value of any width; -1 if v is
 * not an integer or is negative. */
int gocoll_pmix_value_int(const gc_pmix_value_t *v, long long *out) {
    long long x;
    switch (v->type) {
    case GC_PMIX_SIZE: x = (long long)v->data.size; break;
    case GC_PMIX_INT: x = v->data.integer; break;
    case GC_PMIX_INT8: x = v->data.int8; break;
    case GC_PMIX_INT16: x = v->data.int16; break;
    case GC_PMIX_INT32: x = v->data.int32; break;
    case GC_PMIX_INT64: x = v->data.int64; break;
    case GC_PMIX_UINT: x = v->data.uint; break;
    case GC_PMIX_UINT8: x = v->data.uint8; break;
    case GC_PMIX_UINT16: x = v->data.uint16; break;
    case GC_PMIX_UINT32: x = v->data.uint32; break;
    case GC_PMIX_UINT64: x = (long long)v->data.uint64; break;
    case GC_PMIX_PROC_RANK: x = v->data.rank; break;
    default: return -1;
    }
    if (x < 0) return -1;
    *out = x;
    return 0;
}

const char *gocoll_pmix_value_string(const gc_pmix_value_t *v) {
    return v->type == GC_PMIX_STRING ? v->data.string : NULL;
}

int gocoll_pmix_value_bytes(const gc_pmix_value_t *v, const char **p, size_t *n) {
    if (v->type != GC_PMIX_BYTE_OBJECT) return -1;
    *p = v->data.bo.bytes;
    *n = v->data.bo.size;
    return 0;
}

/* PMIX_VALUE_RELEASE: the value's contents, then the value, which
 * PMIx_Get allocated with malloc. */
void gocoll_pmix_value_release(gc_pmix_value_t *v) {
    px.Value_destruct(v);
    free(v);
}
