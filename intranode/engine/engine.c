/*
 * The C half of the shared-memory engine (engine.h). It follows the
 * protocol of package intranode (doc.go there) on the same segment:
 * write this rank's part of the step into its slot of the step's set,
 * publish the step in its control line (waking sleepers), spin until
 * every rank has published it, read. If the peers are slow to come, it
 * hands the wait to the owner's wait function (capi: Go, which sleeps on
 * the futex and watches for dead peers and timeouts). Each call takes one
 * step and lays its data out as the Go half's call of the same name does
 * for a message that fits one step, so that a rank whose call went to Go
 * (a derived datatype, say) still meets the others: what fits one step
 * it reads from its control line, where the Go half wrote its steps
 * (intranode.Steps) and its CMA threshold at attach. Reductions combine
 * the p contributions in the canonical association, as the Go half's do,
 * with kernels (kernels.c) that give package ops' bits.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "engine.h"
#include "kernels.h"

#define SPINS 4000       /* polls before the wait goes to the wait function */
#define SPINS_CROWDED 0  /* the same when there are more local ranks than cores: yield at once */
/* Then, when crowded, sched_yield polls for at most this long before the
 * wait function (Go's futex wait, which also watches for dead peers and
 * timeouts). A time, not a number of yields: on a loaded core one yield
 * can take milliseconds (2000 took 3 s beside a busy loop), and a dead
 * peer would go unnoticed that long per call. 10 ms is far longer than
 * the hand-offs the yields are for (a few µs to a time slice) and far
 * shorter than Go's 100 ms check for dead peers. */
#define YIELD_NS_CROWDED 10000000L
/* Then the wait sleeps on the segment's bell here, in C, for at most
 * this long before it goes to the wait function (Go: dead peers, the
 * timeout). Entering Go from C wakes the Go runtime's sysmon, which then
 * polls every 20 µs for milliseconds: with the wait in Go after 4000
 * polls, an 8-byte allreduce loop at 2 ranks on 2 cores (the engine's
 * calls never in Go otherwise) gave sysmon 1000-1900 time slices a
 * second, taken from the ranks (preload/testdata/probes/wake.c). 50 ms
 * is half Go's 100 ms check for dead peers. */
#define SLEEP_NS 50000000L
#ifndef COPY_MAX /* bench/engineprof.sh may set it, to compare the copy with CMA at larger sizes */
#define COPY_MAX (4 * GOCOLL_SHM_MAX) /* largest allgather (all blocks) and bcast */
#endif
#define PARAM(s, off) \
    ((long)__atomic_load_n((uint32_t *)((s)->base + GOCOLL_SHM_CTL_OFFSET + (long)GOCOLL_SHM_LINE * (s)->rank + (off)), \
                           __ATOMIC_RELAXED))

#ifdef GOCOLL_ENGINE_PROFILE
#include <x86intrin.h>
unsigned long long gocoll_shm_prof[GOCOLL_PROF_STAGES];
static unsigned long long prof_last;
#define PROF_START() (prof_last = __rdtsc())
#define PROF(stage)                                                   \
    do {                                                              \
        unsigned long long t_ = __rdtsc();                            \
        gocoll_shm_prof[GOCOLL_PROF_##stage] += t_ - prof_last;       \
        prof_last = t_;                                               \
    } while (0)
#else
#define PROF_START() ((void)0)
#define PROF(stage) ((void)0)
#endif

void gocoll_shm_init(struct gocoll_shm *s, void *base, int p, int rank, long slot, long data_off, int crowded,
                     gocoll_shm_wait_fn wait, long id) {
    s->p = p, s->rank = rank, s->slot = slot, s->data_off = data_off, s->wait = wait, s->id = id;
    s->warm = 0;
    /* With more ranks than cores, a peer we wait for may need this core:
     * hand the wait over at once, as Open MPI's progress loop yields when
     * oversubscribed (spinning 64 polls first made a 112-byte allreduce
     * at 4 ranks on 2 cores 6.8-7.5 µs, against 3.7-4.4 without them and
     * Open MPI's 4.1-8.5, lat.c's medians). */
    s->spins = crowded ? SPINS_CROWDED : SPINS;
    s->crowded = crowded;
    __atomic_store_n(&s->base, (char *)base, __ATOMIC_RELEASE);
}

static uint64_t *step_of(struct gocoll_shm *s, int q) {
    return (uint64_t *)(s->base + GOCOLL_SHM_CTL_OFFSET + (long)GOCOLL_SHM_LINE * q + GOCOLL_SHM_CTL_STEP);
}
static char *slot_of(struct gocoll_shm *s, int set, int q) { return s->base + s->data_off + ((long)set * s->p + q) * s->slot; }

/* placed is intranode's placed: where in a span of a slot a step places
 * its m bytes, moving on each time the step's set comes round. */
static long placed(uint64_t step, long m, long span) {
    if (m < GOCOLL_SHM_ROTATE_MIN || 2 * m > span) return 0;
    long size = (m + GOCOLL_SHM_ROTATE_STEP - 1) & ~(long)(GOCOLL_SHM_ROTATE_STEP - 1);
    return (long)(step / GOCOLL_SHM_SETS % (uint64_t)(span / size)) * size;
}

/* next returns the step this rank publishes next; its set is step % SETS. */
/* warm maps every page of the data slots writable the first time a call
 * places its data, as intranode's Group.warmUp does for the Go half's
 * calls (why there). MADV_POPULATE_WRITE is Linux 5.14: an older kernel
 * refuses, and pages come on first touch. */
static void warm(struct gocoll_shm *s, long m) {
    if (s->warm || m < GOCOLL_SHM_ROTATE_MIN) return;
    s->warm = 1;
    madvise(s->base + s->data_off, (size_t)GOCOLL_SHM_SETS * s->p * s->slot, 23 /* MADV_POPULATE_WRITE */);
}

static uint64_t next(struct gocoll_shm *s) { return __atomic_load_n(step_of(s, s->rank), __ATOMIC_RELAXED) + 1; }
static int set_of(uint64_t step) { return (int)(step % GOCOLL_SHM_SETS); }

/* publish announces step (this rank's next). */
static void publish(struct gocoll_shm *s, uint64_t step) {
    __atomic_store_n(step_of(s, s->rank), step, __ATOMIC_SEQ_CST);
    uint32_t *seq = (uint32_t *)(s->base + GOCOLL_SHM_BELL_OFFSET + GOCOLL_SHM_BELL_SEQ);
    int32_t *sleepers = (int32_t *)(s->base + GOCOLL_SHM_BELL_OFFSET + GOCOLL_SHM_BELL_SLEEPERS);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) > 0) {
        __atomic_add_fetch(seq, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, seq, FUTEX_WAKE, INT_MAX, 0, 0, 0);
    }
}

static int all_at(struct gocoll_shm *s, uint64_t step) {
    for (int q = 0; q < s->p; q++)
        if (__atomic_load_n(step_of(s, q), __ATOMIC_ACQUIRE) < step) return 0;
    return 1;
}

static long since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* sleep_all sleeps on the bell (as the Go half's waitFrom does: count
 * this rank among the sleepers, read the sequence, sleep only if a peer
 * is still missing; a publisher that sees sleepers bumps the sequence
 * and wakes them all) until every rank has published step, or until
 * SLEEP_NS from t0: 0 when they all have. */
static int sleep_all(struct gocoll_shm *s, uint64_t step, const struct timespec *t0) {
    uint32_t *seq = (uint32_t *)(s->base + GOCOLL_SHM_BELL_OFFSET + GOCOLL_SHM_BELL_SEQ);
    int32_t *sleepers = (int32_t *)(s->base + GOCOLL_SHM_BELL_OFFSET + GOCOLL_SHM_BELL_SLEEPERS);
    do {
        __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
        uint32_t v = __atomic_load_n(seq, __ATOMIC_SEQ_CST);
        if (!all_at(s, step)) {
            struct timespec ms = {0, 1000000}; /* a lost wake-up costs at most this */
            syscall(SYS_futex, seq, FUTEX_WAIT, v, &ms, 0, 0);
        }
        __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
        if (all_at(s, step)) return 0;
    } while (since(t0) < SLEEP_NS);
    return 1;
}

/* wait_all spins, yields when crowded, sleeps on the bell, then lets the
 * wait function wait. */
static int wait_all(struct gocoll_shm *s, uint64_t step, int call) {
    for (int i = 0; i < s->spins; i++) {
        if (all_at(s, step)) return 0;
        __builtin_ia32_pause();
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (s->crowded || !s->wait) {
        /* More ranks than cores: the rank we wait for may be waiting for
         * our core. Yielding hands it over at once; a futex sleep would
         * cost a wake-up on every step. */
        do {
            if (all_at(s, step)) return 0;
            sched_yield();
        } while (!s->wait || since(&t0) < YIELD_NS_CROWDED);
    }
    if (sleep_all(s, step, &t0) == 0) return 0;
    return s->wait(s, call);
}

/* settle waits, before this rank writes its slot for step, for every
 * rank to have published the step before, which this rank may have left
 * without waiting (one in which it read nothing): then no rank reads the
 * set step writes any more. The Go half's Group.settled. */
static int settle(struct gocoll_shm *s, uint64_t step, int call) {
    return all_at(s, step - 1) ? 0 : wait_all(s, step - 1, call);
}

/* combine sets dst = a op b for n elements of kind k (kernels.c). */
#define combine gocoll_shm_combine

static int reducible(int k, int op) {
    return k > GOCOLL_SHM_K_NONE && k < GOCOLL_SHM_NUM_KINDS && op >= GOCOLL_SHM_OP_SUM && op <= GOCOLL_SHM_OP_MIN;
}

/* The canonical association (package ops, Reduction): T(0, p) of the p
 * slots, adjacent pairs, pairs of pairs, an odd one passing up, through a
 * stack of partials per chunk of CHUNK bytes (level 0 in out itself), so
 * that the C half's results are the Go half's, bit for bit, and every
 * reproducible algorithm's. LEVELS partials serve any int p. */
#define CHUNK 512
#define LEVELS 32

int gocoll_shm_canonical;

/* reduce_slots sets out = T(0, p) of the slots of set, each cut to bytes
 * [lo, lo+len), or outside reproducible mode (gocoll_shm_canonical 0) the
 * left-to-right fold, which the Go half's Folded reduction computes too
 * and which needs no stack; out must not overlap a slot. */
static void reduce_slots(struct gocoll_shm *s, int set, int k, int op, char *out, long lo, long len, int size) {
    if (s->p == 1) {
        memcpy(out, slot_of(s, set, 0) + lo, len);
        return;
    }
    if (!gocoll_shm_canonical || s->p <= 3) { /* a fold is T(0, p) for p <= 3 */
        long n = len / size;
        combine(k, op, out, slot_of(s, set, 0) + lo, slot_of(s, set, 1) + lo, n);
        for (int q = 2; q < s->p; q++) combine(k, op, out, out, slot_of(s, set, q) + lo, n);
        return;
    }
    double scratch[LEVELS][CHUNK / sizeof(double)]; /* level i's partial; level 0's is in out */
    long chunk = CHUNK / size * size;
    for (long at = 0; at < len; at += chunk) {
        long n = (len - at < chunk ? len - at : chunk) / size;
        const char *part[LEVELS + 1];
        long count[LEVELS + 1];
        int top = 0;
#define LEVEL(i) ((i) == 0 ? out + at : (char *)scratch[i])
        for (int q = 0; q < s->p; q++) {
            const char *cur = slot_of(s, set, q) + lo + at;
            long c = 1;
            while (top > 0 && count[top - 1] == c) { /* two equal subtrees: combine them */
                top--;
                combine(k, op, LEVEL(top), part[top], cur, n);
                cur = LEVEL(top), c *= 2;
            }
            part[top] = cur, count[top] = c, top++;
        }
        /* Fold the subtrees left, largest first, from the right. */
        const char *cur = part[top - 1];
        for (int i = top - 2; i >= 0; i--) {
            combine(k, op, LEVEL(i), part[i], cur, n);
            cur = LEVEL(i);
        }
#undef LEVEL
    }
}

int gocoll_shm_allreduce(struct gocoll_shm *s, const void *in, void *out, long count, int kind, int size, int op) {
    if (!reducible(kind, op) || count <= 0 || size <= 0) return GOCOLL_SHM_DECLINE;
    long len = count * size;
    if (len > GOCOLL_SHM_MAX || len > s->slot || len > PARAM(s, GOCOLL_SHM_CTL_ONE_STEP)) return GOCOLL_SHM_DECLINE;
    PROF_START();
    uint64_t step = next(s);
    int set = set_of(step), rc = settle(s, step, GOCOLL_CALL_ALLREDUCE);
    if (rc) return rc;
    PROF(WAIT);
    warm(s, len);
    long at = placed(step, len, s->slot);
    memcpy(slot_of(s, set, s->rank) + at, in ? in : out, len);
    PROF(IN);
    publish(s, step);
    PROF(PUBLISH);
    rc = wait_all(s, step, GOCOLL_CALL_ALLREDUCE);
    PROF(WAIT);
    if (rc) return rc;
    reduce_slots(s, set, kind, op, out, at, len, size);
    PROF(OUT);
    return 0;
}

/* The Go half's ReduceScatter moves a piece of Steps.Piece/size elements
 * of every block per step, block q's at q*piece elements into the slot;
 * a call whose longest block fits a piece takes one step, laid out so. */
int gocoll_shm_reduce_scatter(struct gocoll_shm *s, const void *in, void *out, const int *counts, long count, int kind,
                              int size, int op, int call) {
    if (!reducible(kind, op) || size <= 0) return GOCOLL_SHM_DECLINE;
    long total = 0, longest = 0, piece = PARAM(s, GOCOLL_SHM_CTL_PIECE) / size;
    for (int q = 0; q < s->p; q++) {
        long c = counts ? counts[q] : count;
        if (c < 0) return GOCOLL_SHM_DECLINE;
        total += c;
        if (c > longest) longest = c;
    }
    if (total == 0 || total * size > GOCOLL_SHM_MAX || longest > piece || piece * size * s->p > s->slot)
        return GOCOLL_SHM_DECLINE; /* (the last: a piece the slot cannot hold, never from the Go half) */
    PROF_START();
    uint64_t step = next(s);
    int set = set_of(step), rc = settle(s, step, call);
    if (rc) return rc;
    PROF(WAIT);
    warm(s, longest * size);
    long from = placed(step, longest * size, piece * size); /* in every block's piece */
    char *slot = slot_of(s, set, s->rank) + from;
    const char *src = in ? in : out;
    long at = 0, mine = 0, lo = 0;
    for (int q = 0; q < s->p; q++) {
        long c = counts ? counts[q] : count;
        memcpy(slot + q * piece * size, src + at * size, c * size);
        at += c;
        if (q == s->rank) mine = c, lo = q * piece * size + from;
    }
    PROF(IN);
    publish(s, step);
    PROF(PUBLISH);
    if (mine == 0) return 0; /* nothing to read: no need to wait (settle) */
    rc = wait_all(s, step, call);
    PROF(WAIT);
    if (rc) return rc;
    reduce_slots(s, set, kind, op, out, lo, mine * size, size);
    PROF(OUT);
    return 0;
}

/* The Go half's Allgather reads blocks of cma_min bytes and more with CMA
 * (when every rank can), and copies shorter ones through the slots, a
 * slot a step: this takes those that fit one step. Each rank copies its
 * own block into its output while the others arrive, then each peer's
 * block as soon as that peer has published it, whoever comes last. */
int gocoll_shm_allgather(struct gocoll_shm *s, const void *in, void *out, long bytes) {
    long cma_min = PARAM(s, GOCOLL_SHM_CTL_CMA_MIN);
    if (bytes <= 0 || bytes > s->slot || bytes * s->p > COPY_MAX || (cma_min > 0 && bytes >= cma_min && s->p > 1))
        return GOCOLL_SHM_DECLINE;
    PROF_START();
    uint64_t step = next(s);
    int set = set_of(step), rc = settle(s, step, GOCOLL_CALL_ALLGATHER);
    if (rc) return rc;
    PROF(WAIT);
    warm(s, bytes);
    long at = placed(step, bytes, s->slot);
    memcpy(slot_of(s, set, s->rank) + at, in ? in : (char *)out + bytes * s->rank, bytes);
    PROF(IN);
    publish(s, step);
    PROF(PUBLISH);
    if (in) memcpy((char *)out + bytes * s->rank, in, bytes);
    uint64_t copied = 1ull << (s->rank & 63); /* of the first 64 ranks: the blocks copied */
    for (int spin = 0, left = s->p - 1; left > 0 && spin < s->spins; spin++) {
        for (int q = 0; q < s->p && q < 64; q++)
            if (!(copied >> q & 1) && __atomic_load_n(step_of(s, q), __ATOMIC_ACQUIRE) >= step) {
                memcpy((char *)out + bytes * q, slot_of(s, set, q) + at, bytes);
                copied |= 1ull << q, left--, spin = 0;
            }
        if (s->p > 64) break;
        __builtin_ia32_pause();
    }
    PROF(WAIT);
    rc = wait_all(s, step, GOCOLL_CALL_ALLGATHER);
    if (rc) return rc;
    for (int q = 0; q < s->p; q++)
        if (q >= 64 || !(copied >> q & 1)) memcpy((char *)out + bytes * q, slot_of(s, set, q) + at, bytes);
    PROF(OUT);
    return 0;
}

int gocoll_shm_bcast(struct gocoll_shm *s, void *buf, long bytes, int root) {
    if (bytes <= 0 || bytes > s->slot || bytes > COPY_MAX || root < 0 || root >= s->p) return GOCOLL_SHM_DECLINE;
    uint64_t step = next(s);
    int set = set_of(step);
    warm(s, bytes);
    long at = placed(step, bytes, s->slot);
    if (s->rank == root) { /* it reads nothing: it leaves without waiting (settle) */
        int rc = settle(s, step, GOCOLL_CALL_BCAST);
        if (rc) return rc;
        memcpy(slot_of(s, set, root) + at, buf, bytes);
        publish(s, step);
        return 0;
    }
    publish(s, step);
    int rc = wait_all(s, step, GOCOLL_CALL_BCAST);
    if (rc) return rc;
    memcpy(buf, slot_of(s, set, root) + at, bytes);
    return 0;
}

int gocoll_shm_barrier(struct gocoll_shm *s) {
    uint64_t step = next(s);
    publish(s, step);
    return wait_all(s, step, GOCOLL_CALL_BARRIER);
}
