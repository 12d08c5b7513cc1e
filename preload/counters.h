/*
 * The C half's path counters (preload.h's GC_K_*), counted by the entry
 * points (shim.c) and the request calls (requests.c); counters.c keeps
 * them. gc_count is inline: it is on the path of every call, a
 * remembered host call's included.
 *
 * Each thread that makes calls counts in a block of its own, with plain
 * adds (its only writer), which gc_counter sums with gc_counters: exact,
 * without a locked add per call (on this machine a quarter of what a
 * cached host call spends here). A thread's block outlives it, with its
 * counts; a thread that cannot get one counts in gc_counters, atomically.
 */
#ifndef GOCOLL_PRELOAD_COUNTERS_H
#define GOCOLL_PRELOAD_COUNTERS_H

#include "preload.h"

struct gc_thread_counters {
    uint64_t n[GC_NCOLL][GC_NCOUNTERS];
    struct gc_thread_counters *next;
};
extern __thread __attribute__((tls_model("initial-exec"))) struct gc_thread_counters *gc_my_counters;
struct gc_thread_counters *gc_new_counters(void); /* the calling thread's block, NULL if none can be had */

static inline __attribute__((always_inline)) void gc_count(int coll, int k) {
    struct gc_thread_counters *t = gc_my_counters;
    if (t || (t = gc_new_counters()))
        __atomic_store_n(&t->n[coll][k], __atomic_load_n(&t->n[coll][k], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&gc_counters[coll][k], 1, __ATOMIC_RELAXED);
}

#endif
