/* The C half's path counters (counters.h). */
#include <stdlib.h>
#include "counters.h"

uint64_t gc_counters[GC_NCOLL][GC_NCOUNTERS];
__thread __attribute__((tls_model("initial-exec"))) struct gc_thread_counters *gc_my_counters;
static struct gc_thread_counters *all_counters;

struct gc_thread_counters *gc_new_counters(void) {
    struct gc_thread_counters *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->next = __atomic_load_n(&all_counters, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&all_counters, &t->next, t, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
    return gc_my_counters = t;
}

/* gc_counter is counter k of collective coll, over every thread. */
uint64_t gc_counter(int coll, int k) {
    uint64_t n = __atomic_load_n(&gc_counters[coll][k], __ATOMIC_RELAXED);
    for (struct gc_thread_counters *t = __atomic_load_n(&all_counters, __ATOMIC_ACQUIRE); t; t = t->next)
        n += __atomic_load_n(&t->n[coll][k], __ATOMIC_RELAXED);
    return n;
}
