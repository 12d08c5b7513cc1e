/*
 * gocoll's requests: the nonblocking and persistent calls that shim.c
 * gives gocoll (requests.h), and the completion calls that must tell
 * gocoll's requests from the host's.
 *
 * A call that gocoll runs as a request (gc_request_run) gets a slot
 * here, which holds the Go half's request id, and the application a
 * handle the host never makes: on Open MPI (MPI_Request a pointer) the
 * slot's address; on MPICH (an int) GC_MPICH_REQ | slot, whose handle
 * kind (the top two bits) is MPICH's HANDLE_KIND_INVALID, so it is
 * neither MPI_REQUEST_NULL (0x2c000000) nor any request MPICH makes.
 * A completion call with no gocoll request in flight anywhere (live 0)
 * goes straight to PMPI; else one compare per request tells them apart.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "counters.h"
#include "requests.h"
#include "_cgo_export.h"

#define NREQ 4096
#define GC_MPICH_REQ 0x04000000u

struct req {
    int coll;
    int id;          /* the Go half's request; 0: the slot is free */
    int persistent;
    int active;      /* started and not completed: counted in cs->held */
    H comm;
    struct gc_comm *cs;
};
static struct req slots[NREQ];
static int live; /* slots in use */
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;

/* ours returns the slot of a gocoll request handle, or NULL. */
static inline struct req *ours(H h) {
    if (gc_flavor == GC_MPICH) {
        uint32_t v = (uint32_t)h;
        if ((v & 0xfc000000u) != GC_MPICH_REQ || (v & 0x03ffffffu) == 0 || (v & 0x03ffffffu) > NREQ) return NULL;
        return &slots[(v & 0x03ffffffu) - 1];
    }
    uintptr_t p = (uintptr_t)h;
    if (p < (uintptr_t)&slots[0] || p >= (uintptr_t)&slots[NREQ]) return NULL;
    return (struct req *)p;
}

static H handle(struct req *r) {
    if (gc_flavor == GC_MPICH) return GC_MPICH_REQ | (uint32_t)(r - slots + 1);
    return (H)(uintptr_t)r;
}

/* Request arrays: MPICH's handles are ints, Open MPI's pointers. */
static inline H rget(const void *a, int i) {
    return gc_flavor == GC_MPICH ? ((const uint32_t *)a)[i] : ((const H *)a)[i];
}
static inline void rset(void *a, int i, H v) {
    if (gc_flavor == GC_MPICH)
        ((uint32_t *)a)[i] = (uint32_t)v;
    else
        ((H *)a)[i] = v;
}
static inline void *rat(void *a, int i) { return (char *)a + (size_t)i * (gc_flavor == GC_MPICH ? 4 : 8); }

static inline int any_live(void) { return __atomic_load_n(&live, __ATOMIC_ACQUIRE) != 0; }

static int active_reqs; /* started and not completed, in every communicator */

static void hold(struct req *r, int on) {
    if (r->active == on) return;
    r->active = on;
    __atomic_add_fetch(&active_reqs, on ? 1 : -1, __ATOMIC_ACQ_REL);
    if (r->cs) __atomic_add_fetch(&r->cs->held, on ? 1 : -1, __ATOMIC_ACQ_REL);
}

/*
 * Progress. MPI requires a rank blocked in any MPI call (a host
 * MPI_Recv, MPI_Bcast, ...) to move its requests: a peer may be waiting
 * for one of them before it can answer. The host's blocking calls know
 * nothing of gocoll's requests, so gocoll takes a request only where
 * something moves it then (gc_requests_movable):
 *   - Open MPI: every blocking call spins in opal_progress, which calls
 *     the functions registered with opal_progress_register (its own
 *     nonblocking collectives move that way); progress_hook moves
 *     gocoll's requests from there, only while some are active, and not
 *     from inside itself (gocoll's own calls to the host spin there too);
 *   - GOCOLL_PROGRESS_THREAD=1 (which needs MPI_THREAD_MULTIPLE:
 *     entry.go): the progress thread moves them.
 * Otherwise (MPICH, which offers no such hook, without the thread) the
 * nonblocking and persistent forms go to the host (GC_R_PROGRESS).
 */
static int movable;

int gc_requests_movable(void) { return __atomic_load_n(&movable, __ATOMIC_RELAXED); }

static __thread __attribute__((tls_model("initial-exec"))) int in_hook;

static int progress_hook(void) {
    if (in_hook || !__atomic_load_n(&active_reqs, __ATOMIC_RELAXED)) return 0;
    in_hook = 1;
    gc_progress();
    in_hook = 0;
    return 0;
}

void gc_register_progress(int thread) {
    if (thread) {
        __atomic_store_n(&movable, 1, __ATOMIC_RELEASE);
        return;
    }
    if (gc_flavor != GC_OMPI) return;
    int (*reg)(int (*)(void)) = (int (*)(int (*)(void)))dlsym(RTLD_DEFAULT, "opal_progress_register");
    if (reg && reg(progress_hook) == 0) __atomic_store_n(&movable, 1, __ATOMIC_RELEASE);
}

/* gc_requests_forget drops a communicator's state, being freed, from
 * the requests that point to it (an erroneous program may free a
 * communicator with requests on it; their completion must not write to
 * freed memory). */
void gc_requests_forget(struct gc_comm *cs) {
    if (!any_live()) return;
    pthread_mutex_lock(&slots_mu);
    for (int i = 0; i < NREQ; i++)
        if (slots[i].id && slots[i].cs == cs) slots[i].cs = NULL;
    pthread_mutex_unlock(&slots_mu);
}

/* request_new puts Go's request id of call c in a slot and hands the
 * application its handle: 0, or an MPI error class. */
static int request_new(const struct gc_call *c, const struct gc_form *f, int id) {
    pthread_mutex_lock(&slots_mu);
    struct req *r = NULL;
    for (int i = 0; i < NREQ && !r; i++)
        if (!slots[i].id) r = &slots[i];
    if (r) {
        r->coll = c->coll, r->id = id, r->persistent = f->persistent, r->active = 0, r->comm = c->comm, r->cs = c->cs;
        __atomic_add_fetch(&live, 1, __ATOMIC_ACQ_REL);
    }
    pthread_mutex_unlock(&slots_mu);
    if (!r) {
        fprintf(stderr, "gocoll: more than %d collective requests at once\n", NREQ);
        gc_request_free(id);
        return 16; /* MPI_ERR_INTERN */
    }
    if (!f->persistent) hold(r, 1);
    rset(f->req, 0, handle(r));
    return 0;
}

/* gc_request_run makes a request of a call gocoll runs, in form f
 * (gc_new_request), and hands the application its handle: MPI_SUCCESS, a
 * host error code (after calling the communicator's error handler), or
 * the Go half's -1 or -2 (the host runs the call), as shim.c's run. */
int gc_request_run(struct gc_call *c, const struct gc_form *f) {
    int id = 0;
    int rc = gc_new_request(c, f->persistent, &id);
    if (rc < 0) return rc;
    if (rc == 0) rc = request_new(c, f, id);
    if (rc == 0) {
        if (!f->persistent) gc_count(c->coll, GC_K_REQUEST); /* a persistent one counts at each MPI_Start */
        return 0;
    }
    int code = gc_host_class(rc);
    gc_p.Comm_call_errhandler(c->comm, code);
    return code;
}

static void release(struct req *r, void *h) {
    hold(r, 0);
    pthread_mutex_lock(&slots_mu);
    r->id = 0, r->cs = NULL;
    __atomic_sub_fetch(&live, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&slots_mu);
    rset(h, 0, gc_c.request_null);
}

/* ---- statuses ---- */

static inline void *status_at(void *st, int i) {
    return st == gc_c.status_ignore || !st ? NULL : (char *)st + (size_t)i * gc_c.status_size;
}

/* empty sets a completed collective's status: no source, no tag, the
 * error (MPI_SUCCESS unless it failed), count 0, not cancelled. */
static void empty(void *st, int err) {
    if (!st || st == gc_c.status_ignore) return;
    memset(st, 0, gc_c.status_size);
    int any = -1;
    memcpy((char *)st + gc_c.status_source, &gc_c.any_source, sizeof(int));
    memcpy((char *)st + gc_c.status_tag, &any, sizeof(int));
    memcpy((char *)st + gc_c.status_error, &err, sizeof(int));
}

/* fail maps a gocoll error class to the host's and raises it on the
 * request's communicator's error handler. */
static int fail(struct req *r, int cls) {
    int code = gc_host_class(cls);
    gc_p.Comm_call_errhandler(r->comm, code);
    return code;
}

/* finished completes a request that Go reports done (rc its class):
 * the status, the slot (a nonpersistent one goes, *h becomes
 * MPI_REQUEST_NULL; a persistent one stays, inactive). */
static int finished(struct req *r, void *h, int rc, void *st) {
    int code = rc ? gc_host_class(rc) : 0;
    empty(st, code);
    H comm = r->comm;
    if (r->persistent)
        hold(r, 0);
    else
        release(r, h);
    if (rc) gc_p.Comm_call_errhandler(comm, code);
    return code;
}

/* test tests one of ours: 1 if complete (and completed), 0 if not, or
 * -1 if it is an inactive persistent request. *rc its result. */
static int test(struct req *r, void *h, void *st, int *rc) {
    *rc = 0;
    if (!r->active) {
        empty(st, 0);
        return -1;
    }
    int flag = 0;
    int cls = gc_request_test(r->id, &flag, !r->persistent);
    if (!flag) return 0;
    *rc = finished(r, h, cls, st);
    return 1;
}

/* idle backs off after many rounds in which nothing completed. */
static void idle(int *rounds) {
    if (++*rounds < 64) return;
    if (*rounds < 1024) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

/* late finds a host function before gocoll has looked them up (a call
 * before the first collective), or where the lookup failed. */
static void *late(void *slot, const char *name) {
    void **p = slot;
    gc_lookup_functions();
    if (!*p) *p = dlsym(RTLD_NEXT, name);
    return *p;
}
#define HOSTFN(fn) (gc_p.fn ? gc_p.fn : (__typeof__(gc_p.fn))late(&gc_p.fn, "PMPI_" #fn))

/* ---- the entry points ---- */

int MPI_Wait(H *req, void *st) {
    struct req *r;
    if (!any_live() || !req || !(r = ours(rget(req, 0)))) return HOSTFN(Wait)(req, st);
    if (!r->active) {
        empty(st, 0);
        return 0;
    }
    return finished(r, req, gc_request_wait(r->id, !r->persistent), st);
}

int MPI_Test(H *req, int *flag, void *st) {
    struct req *r;
    if (!any_live() || !req || !(r = ours(rget(req, 0)))) return HOSTFN(Test)(req, flag, st);
    int rc, done = test(r, req, st, &rc);
    *flag = done != 0;
    return rc;
}

int MPI_Request_get_status(H req, int *flag, void *st) {
    struct req *r;
    if (!any_live() || !(r = ours(req))) return HOSTFN(Request_get_status)(req, flag, st);
    *flag = !r->active || gc_request_done(r->id);
    if (*flag) empty(st, 0);
    return 0;
}

int MPI_Cancel(H *req) {
    struct req *r;
    if (!any_live() || !req || !(r = ours(rget(req, 0)))) return HOSTFN(Cancel)(req);
    if (!gc_errhandler_returns(r->comm))
        fprintf(stderr, "gocoll: MPI_Cancel: a collective request cannot be cancelled\n");
    return fail(r, 19); /* MPI_ERR_REQUEST */
}

int MPI_Request_free(H *req) {
    struct req *r;
    if (!any_live() || !req || !(r = ours(rget(req, 0)))) return HOSTFN(Request_free)(req);
    /* An active request still completes (MPI): its buffers may be reused
     * once the program learns that it has. */
    int cls = gc_request_free(r->id);
    release(r, req);
    return cls ? fail(r, cls) : 0;
}

int MPI_Start(H *req) {
    struct req *r;
    if (!any_live() || !req || !(r = ours(rget(req, 0)))) return HOSTFN(Start)(req);
    if (!r->persistent) return fail(r, 19);
    int cls = gc_request_start(r->id);
    if (cls) return fail(r, cls);
    hold(r, 1);
    gc_count(r->coll, GC_K_REQUEST);
    return 0;
}

int MPI_Startall(int n, void *reqs) {
    if (!any_live() || n <= 0 || !reqs) return HOSTFN(Startall)(n, reqs);
    int mine = 0;
    for (int i = 0; i < n && !mine; i++) mine = ours(rget(reqs, i)) != NULL;
    if (!mine) return HOSTFN(Startall)(n, reqs);
    /* In order: collectives start in the order the program gives them. */
    for (int i = 0; i < n; i++) {
        int rc = ours(rget(reqs, i)) ? MPI_Start(rat(reqs, i)) : HOSTFN(Start)(rat(reqs, i));
        if (rc) return rc;
    }
    return 0;
}

/* split reports whether any of n requests is ours. */
static int mixed(int n, const void *reqs) {
    if (!any_live() || n <= 0 || !reqs) return 0;
    for (int i = 0; i < n; i++)
        if (ours(rget(reqs, i))) return 1;
    return 0;
}

/* host_subset copies the host's requests of reqs (not ours) into hs and
 * their indices into at; it returns how many (Waitany, Waitsome: the
 * host's own calls know which of its requests are inactive). */
static int host_subset(int n, const void *reqs, void *hs, int *at) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!ours(rget(reqs, i))) rset(hs, k, rget(reqs, i)), at[k++] = i;
    return k;
}

/* all is Waitall (wait) and Testall: each request tested in turn, ours
 * with gocoll's progress, the host's with PMPI_Test (MPICH 4.0's
 * PMPI_Testall rejects its own persistent collective requests, and
 * per request is what Waitall needs anyway: a later request may be what
 * a peer waits for before it completes an earlier one). Testall
 * completes nothing unless every request is complete: it looks first
 * (PMPI_Request_get_status, gc_request_done). */
static int all(int n, void *reqs, int *flag, void *sts, int wait) {
    char *done = calloc(n ? n : 1, 1);
    if (!done) return gc_host_class(16);
    int err = 0, rounds = 0, left = n;
    if (!wait) {
        int ready = 1;
        for (int i = 0; i < n && ready; i++) {
            struct req *r = ours(rget(reqs, i));
            int f = 1;
            if (r)
                f = !r->active || gc_request_done(r->id);
            else if (rget(reqs, i) != gc_c.request_null && gc_p.Request_get_status(rget(reqs, i), &f, gc_c.status_ignore))
                f = 1; /* its error comes from PMPI_Test below */
            ready = f;
        }
        *flag = ready;
        if (!ready) {
            free(done);
            return 0;
        }
    }
    while (left > 0) {
        int moved = 0;
        for (int i = 0; i < n; i++) {
            if (done[i]) continue;
            struct req *r = ours(rget(reqs, i));
            int f = 0, rc = 0;
            if (!r) {
                rc = gc_p.Test(rat(reqs, i), &f, status_at(sts, i) ? status_at(sts, i) : gc_c.status_ignore);
                if (rc) f = 1;
            } else if (test(r, rat(reqs, i), status_at(sts, i), &rc) != 0) {
                f = 1;
            }
            if (!f) continue;
            if (rc) {
                err = 1;
                void *st = status_at(sts, i);
                if (st) memcpy((char *)st + gc_c.status_error, &rc, sizeof rc);
            }
            done[i] = 1, left--, moved = 1;
        }
        if (!left) break;
        if (moved)
            rounds = 0;
        else
            idle(&rounds);
    }
    free(done);
    return err ? gc_c.err_in_status : 0;
}

int MPI_Waitall(int n, void *reqs, void *sts) {
    if (!mixed(n, reqs)) return HOSTFN(Waitall)(n, reqs, sts);
    return all(n, reqs, NULL, sts, 1);
}

int MPI_Testall(int n, void *reqs, int *flag, void *sts) {
    if (!mixed(n, reqs)) return HOSTFN(Testall)(n, reqs, flag, sts);
    return all(n, reqs, flag, sts, 0);
}

/* some is Waitany/Testany (one) and Waitsome/Testsome: ours tested in
 * turn, the host's with PMPI_Testany or PMPI_Testsome on their subset
 * (which knows which of them are inactive). */
static int some(int n, void *reqs, int *outcount, int *indices, void *sts, int wait, int one, int *flag) {
    H *hs = malloc(n * sizeof *hs); /* host layout: rget, rset */
    int *at = malloc(n * sizeof *at), *hidx = malloc(n * sizeof *hidx);
    char *hst = malloc((size_t)n * gc_c.status_size);
    int rc = 0, rounds = 0;
    if (!hs || !at || !hidx || !hst) {
        rc = 16;
        goto out;
    }
    int nh = host_subset(n, reqs, hs, at);
    for (;;) {
        int active = 0, got = 0;
        for (int i = 0; i < n && !(one && got); i++) {
            struct req *r = ours(rget(reqs, i));
            if (!r || !r->active) continue;
            active = 1;
            int flag1 = 0;
            int cls = gc_request_test(r->id, &flag1, !r->persistent);
            if (!flag1) continue;
            void *st = one ? sts : status_at(sts, got);
            int code = finished(r, rat(reqs, i), cls, st == gc_c.status_ignore ? NULL : st);
            if (code) rc = one ? code : gc_c.err_in_status;
            indices[got++] = i;
        }
        int hactive = 0;
        if (nh && !(one && got)) {
            int hout = 0, hrc;
            if (one) {
                int hi = 0, f = 0;
                hrc = gc_p.Testany(nh, hs, &hi, &f, sts);
                hactive = !(f && hi == gc_c.undefined);
                if (f && hi != gc_c.undefined) hidx[0] = hi, hout = 1;
            } else {
                hrc = gc_p.Testsome(nh, hs, &hout, hidx, sts == gc_c.status_ignore ? sts : hst);
                hactive = hout != gc_c.undefined;
                if (hout == gc_c.undefined) hout = 0;
            }
            if (hrc) rc = hrc;
            for (int k = 0; k < hout; k++) {
                int i = at[hidx[k]];
                rset(reqs, i, rget(hs, hidx[k]));
                if (!one && sts != gc_c.status_ignore && sts)
                    memcpy(status_at(sts, got), hst + (size_t)k * gc_c.status_size, gc_c.status_size);
                indices[got++] = i;
            }
        }
        if (got || (!active && !hactive) || !wait) {
            if (!active && !hactive && !got) {
                *outcount = gc_c.undefined;
                if (one) empty(sts == gc_c.status_ignore ? NULL : sts, 0);
                if (flag) *flag = 1;
            } else {
                *outcount = got;
                if (flag) *flag = got > 0;
            }
            break;
        }
        idle(&rounds);
    }
out:
    free(hs), free(at), free(hidx), free(hst);
    return rc;
}

int MPI_Waitany(int n, void *reqs, int *index, void *st) {
    if (!mixed(n, reqs)) return HOSTFN(Waitany)(n, reqs, index, st);
    int out = 0, rc = some(n, reqs, &out, index, st, 1, 1, NULL);
    if (out == gc_c.undefined) *index = gc_c.undefined;
    return rc;
}

int MPI_Testany(int n, void *reqs, int *index, int *flag, void *st) {
    if (!mixed(n, reqs)) return HOSTFN(Testany)(n, reqs, index, flag, st);
    int out = 0, rc = some(n, reqs, &out, index, st, 0, 1, flag);
    if (out == gc_c.undefined || out == 0) *index = gc_c.undefined;
    return rc;
}

int MPI_Waitsome(int n, void *reqs, int *outcount, int *indices, void *sts) {
    if (!mixed(n, reqs)) return HOSTFN(Waitsome)(n, reqs, outcount, indices, sts);
    return some(n, reqs, outcount, indices, sts, 1, 0, NULL);
}

int MPI_Testsome(int n, void *reqs, int *outcount, int *indices, void *sts) {
    if (!mixed(n, reqs)) return HOSTFN(Testsome)(n, reqs, outcount, indices, sts);
    return some(n, reqs, outcount, indices, sts, 0, 0, NULL);
}
