/*
 * engineprof: the shared-memory engine's C half (intranode/engine) alone,
 * timed step by step with the time stamp counter, so that a change to it
 * is measured the same way every time.
 *
 * It maps one segment with the Go half's layout (the generated constants),
 * forks p ranks (processes, as MPI jobs run), and for each size runs the
 * collective the MPI micro-benchmark way: the engine's barrier before
 * every call (what MPI_Barrier runs on the fast path), only the call
 * timed. The engine is built into this program with
 * -DGOCOLL_ENGINE_PROFILE, so each call also adds the ticks it spends in
 * each stage: copying into its slot (in), publishing its step (publish),
 * waiting for the peers (wait), reducing or copying out of the slots
 * (out). Per size it prints the median and the lowest time of a call and
 * the median of each stage (each the average over the ranks of the
 * rank's median), and, as the reference of what the bytes cost, the
 * median time of one memcpy of the call's bytes on rank 0, cache-hot, in
 * the same run. Medians and minima, not means: on a loaded machine a
 * preemption costs milliseconds.
 *
 *   engineprof [-p P] [-c allreduce,reduce_scatter_block,allgather,barrier,reduce_scatter,allgather_cma]
 *              [-m MIN[:MAX]] [-i ITERS] [-w WARMUP] [-slot BYTES] [-cmamin BYTES]
 *              [-d float|double|int] [-pin] [-nobarrier] [-canonical] [-noref]
 *
 * Sizes as collbench's: the whole vector for the reductions (MPI_FLOAT by
 * default), the bytes each rank sends for allgather; reduce_scatter splits
 * the vector as collbench does (the first n mod p ranks one element more);
 * allgather_cma is the Go half's allgather by CMA written out here (its
 * stages are not split), to compare with the engine's copy through the
 * slots at the same sizes (ENGINE_CFLAGS=-DCOPY_MAX=... lets the engine
 * copy longer blocks). The segment's steps
 * are the Go half's defaults (intranode.Steps: size classes in 1 MiB
 * slots), or with -slot the slot's; the engine declines allgather blocks
 * from -cmamin bytes (default 32 KiB, the Go half's CMAMin), which the Go
 * half reads with CMA. Built and run by
 * bench/engineprof.sh, which also runs it under callgrind.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>
#include "engine.h"

#define MAXP 64
#define STAGES GOCOLL_PROF_STAGES
static const char *stage_names[STAGES] = {"in", "publish", "wait", "out"};

struct result { /* one rank's, per size, in shared memory */
    double med, min, stage[STAGES];
};

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double tsc_ghz(void) {
    double t0 = now_ns();
    unsigned long long c0 = __rdtsc();
    while (now_ns() - t0 < 50e6) {
    }
    return (double)(__rdtsc() - c0) / (now_ns() - t0);
}

static int cmp(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}
static unsigned long long median(unsigned long long *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2];
}

/* The Go half's allgather by CMA (intranode/cma.go), for comparison with
 * the engine's copy through the slots: publish the block's address and
 * a step, copy the own block while the peers arrive, wait, read every
 * peer's block with process_vm_readv, publish "done reading", wait. */
static uint64_t *ctl_step(char *seg, int q) { return (uint64_t *)(seg + GOCOLL_SHM_CTL_OFFSET + (long)GOCOLL_SHM_LINE * q); }
static void step_all(char *seg, int p, int rank) {
    uint64_t step = __atomic_load_n(ctl_step(seg, rank), __ATOMIC_RELAXED) + 1;
    __atomic_store_n(ctl_step(seg, rank), step, __ATOMIC_SEQ_CST);
    for (int q = 0; q < p; q++)
        while (__atomic_load_n(ctl_step(seg, q), __ATOMIC_ACQUIRE) < step) __builtin_ia32_pause();
}
static int allgather_cma(char *seg, int p, int rank, const char *in, char *out, long bytes) {
#ifdef GOCOLL_SHM_CTL_ADDR
    char *ctl = seg + GOCOLL_SHM_CTL_OFFSET + (long)GOCOLL_SHM_LINE * rank;
    __atomic_store_n((uint64_t *)(ctl + GOCOLL_SHM_CTL_ADDR), (uint64_t)(uintptr_t)in, __ATOMIC_RELAXED);
    uint64_t step = __atomic_load_n(ctl_step(seg, rank), __ATOMIC_RELAXED) + 1;
    __atomic_store_n(ctl_step(seg, rank), step, __ATOMIC_SEQ_CST);
    memcpy(out + bytes * rank, in, bytes);
    gocoll_shm_prof[GOCOLL_PROF_IN] = 0;
    for (int q = 0; q < p; q++)
        while (__atomic_load_n(ctl_step(seg, q), __ATOMIC_ACQUIRE) < step) __builtin_ia32_pause();
    for (int i = 1; i < p; i++) {
        int q = (rank + i) % p;
        char *qc = seg + GOCOLL_SHM_CTL_OFFSET + (long)GOCOLL_SHM_LINE * q;
        struct iovec l = {out + bytes * q, bytes},
                     r = {(void *)(uintptr_t)__atomic_load_n((uint64_t *)(qc + GOCOLL_SHM_CTL_ADDR), __ATOMIC_RELAXED), bytes};
        if (process_vm_readv(*(uint32_t *)(qc + GOCOLL_SHM_CTL_PID), &l, 1, &r, 1, 0) != bytes) return 1;
    }
    step_all(seg, p, rank);
    return 0;
#else
    (void)seg, (void)p, (void)rank, (void)in, (void)out, (void)bytes;
    return GOCOLL_SHM_DECLINE;
#endif
}

static int has(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *c = list; (c = strstr(c, name)); c += n)
        if ((c == list || c[-1] == ',') && (c[n] == 0 || c[n] == ',')) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int p = 2, iters = 2000, warm = 200, pin = 0, barrier = 1, canonical = 0, ref = 1;
    long lo = 4, hi = 4096, slot = 0, cma_min = 32 << 10;
    const char *colls = "allreduce,reduce_scatter_block,allgather", *dtype = "float";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "-p")) p = atoi(v), i++;
        else if (!strcmp(a, "-c")) colls = v, i++;
        else if (!strcmp(a, "-m")) {
            lo = hi = atol(v);
            if (strchr(v, ':')) hi = atol(strchr(v, ':') + 1);
            i++;
        } else if (!strcmp(a, "-i")) iters = atoi(v), i++;
        else if (!strcmp(a, "-w")) warm = atoi(v), i++;
        else if (!strcmp(a, "-slot")) slot = atol(v), i++;
        else if (!strcmp(a, "-cmamin")) cma_min = atol(v), i++;
        else if (!strcmp(a, "-d")) dtype = v, i++;
        else if (!strcmp(a, "-pin")) pin = 1;
        else if (!strcmp(a, "-nobarrier")) barrier = 0;
        else if (!strcmp(a, "-canonical")) canonical = 1;
        else if (!strcmp(a, "-noref")) ref = 0;
        else {
            fprintf(stderr, "usage: engineprof [-p P] [-c COLLS] [-m MIN[:MAX]] [-i ITERS] [-w WARMUP] [-slot BYTES] [-cmamin BYTES]"
                            " [-d float|double|int] [-pin] [-nobarrier] [-canonical] [-noref]\n");
            return 2;
        }
    }
    if (p < 1 || p > MAXP || iters < 1) return 2;
    int kind = GOCOLL_SHM_K_F32, size = 4;
    if (!strcmp(dtype, "double")) kind = GOCOLL_SHM_K_F64, size = 8;
    else if (!strcmp(dtype, "int")) kind = GOCOLL_SHM_K_I32;
    gocoll_shm_canonical = canonical;
    /* The Go half's steps (intranode.Steps): by size class in a slot of
     * 1 MiB, unless the slot is given (GOCOLL_SHM_SLOT), which then bounds
     * every step. */
    long one_step = slot, piece = slot / p;
    if (slot <= 0) slot = 1 << 20, one_step = 128 << 10, piece = slot / p < 512 << 10 ? slot / p : 512 << 10;
    slot = (slot + 63) & ~63L;
    long data_off = (GOCOLL_SHM_CTL_OFFSET + (long)GOCOLL_SHM_LINE * p + GOCOLL_SHM_DATA_ALIGN - 1) &
                    ~(long)(GOCOLL_SHM_DATA_ALIGN - 1);
    long total = data_off + (long)GOCOLL_SHM_SETS * (p + 1) * slot;
    char *seg = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct result *res = mmap(NULL, sizeof(struct result) * MAXP, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (seg == MAP_FAILED || res == MAP_FAILED) return perror("mmap"), 1;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double ghz = tsc_ghz();
    int rank = 0;
    for (int r = 1; r < p; r++)
        if (fork() == 0) {
            rank = r;
            break;
        }
    if (pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(rank % ncpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    struct gocoll_shm s;
#ifdef GOCOLL_SHM_CTL_ONE_STEP
    char *ctl = seg + GOCOLL_SHM_CTL_OFFSET + (long)GOCOLL_SHM_LINE * rank;
#ifdef GOCOLL_SHM_CTL_PID
    *(uint32_t *)(ctl + GOCOLL_SHM_CTL_PID) = getpid();
#endif
    *(uint32_t *)(ctl + GOCOLL_SHM_CTL_ONE_STEP) = one_step;
    *(uint32_t *)(ctl + GOCOLL_SHM_CTL_PIECE) = piece;
    *(uint32_t *)(ctl + GOCOLL_SHM_CTL_CMA_MIN) = p > 1 ? cma_min : 0;
#endif
    gocoll_shm_init(&s, seg, p, rank, slot, data_off, p > ncpu, NULL, 0);
    if (rank == 0) {
        char load[128] = "";
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) {
            if (!fgets(load, sizeof load, f)) load[0] = 0;
            fclose(f);
            load[strcspn(load, "\n")] = 0;
        }
        printf("# engineprof: p=%d slot=%ld %s%s, %s before every call, median and lowest of %d calls after %d; "
               "TSC %.3f GHz; loadavg %s\n",
               p, slot, dtype, canonical ? " canonical" : "", barrier ? "the engine's barrier" : "nothing", iters, warm, ghz,
               load);
        printf("# ns per call; stages: the median per rank, averaged over ranks; memcpy: rank 0, the call's bytes, cache-hot\n");
        printf("%-22s %9s %9s %9s", "collective", "bytes", "med_ns", "min_ns");
        for (int k = 0; k < STAGES; k++) printf(" %9s", stage_names[k]);
        printf(" %9s\n", "memcpy");
        fflush(stdout);
    }
    unsigned long long *calls = malloc(sizeof(unsigned long long) * iters);
    unsigned long long *stage = malloc(sizeof(unsigned long long) * iters * STAGES);
    const char *names[] = {"allreduce", "reduce_scatter_block", "allgather", "barrier", "reduce_scatter", "allgather_cma"};
    int *counts = malloc(sizeof(int) * p);
    for (int c = 0; c < 6; c++) {
        if (!has(colls, names[c])) continue;
        for (long n = lo; n <= hi; n *= 2) {
            long count = n / size, bytes = n;
            if (c == 1) count = n / size / p, bytes = count * size * p;
            if (c == 3) bytes = 0;
            if (c == 4) /* as collbench splits it: the first n mod p ranks one element more */
                for (int q = 0; q < p; q++) counts[q] = n / size / p + (q < n / size % p);
            if ((c < 2 || c == 4) && count == 0) continue;
            long inlen = bytes, outlen = c == 2 || c == 5 ? bytes * p : bytes;
            char *in = aligned_alloc(64, inlen + 64), *out = aligned_alloc(64, outlen + 64);
            for (long i = 0; i < inlen; i++) in[i] = (char)(i * 7 + rank);
            memset(out, 0, outlen);
            int declined = 0;
            for (int it = -warm; it < iters; it++) {
                if (barrier) gocoll_shm_barrier(&s);
                memset(gocoll_shm_prof, 0, sizeof gocoll_shm_prof);
                unsigned long long t0 = __rdtsc();
                int rc = 0;
                switch (c) {
                case 0: rc = gocoll_shm_allreduce(&s, in, out, count, kind, size, GOCOLL_SHM_OP_SUM); break;
                case 1:
                    rc = gocoll_shm_reduce_scatter(&s, in, out, NULL, count, kind, size, GOCOLL_SHM_OP_SUM,
                                                   GOCOLL_CALL_REDUCE_SCATTER_BLOCK);
                    break;
                case 2: rc = gocoll_shm_allgather(&s, in, out, bytes); break;
                case 3: rc = gocoll_shm_barrier(&s); break;
                case 4:
                    rc = gocoll_shm_reduce_scatter(&s, in, out, counts, 0, kind, size, GOCOLL_SHM_OP_SUM,
                                                   GOCOLL_CALL_REDUCE_SCATTER);
                    break;
                case 5: rc = allgather_cma(seg, p, rank, in, out, bytes); break;
                }
                unsigned long long t1 = __rdtsc();
                if (rc == GOCOLL_SHM_DECLINE) {
                    declined = 1;
                    break;
                }
                if (it >= 0) {
                    calls[it] = t1 - t0;
                    for (int k = 0; k < STAGES; k++) stage[k * iters + it] = gocoll_shm_prof[k];
                }
            }
            if (declined) { /* every rank declines alike */
                if (rank == 0) printf("%-22s %9ld   (declined)\n", names[c], bytes);
                free(in), free(out);
                continue;
            }
            struct result *me = &res[rank];
            me->med = median(calls, iters) / ghz;
            me->min = calls[0] / ghz;
            for (int k = 0; k < STAGES; k++) me->stage[k] = median(stage + k * iters, iters) / ghz;
            gocoll_shm_barrier(&s);
            if (rank == 0) {
                double mc = 0;
                if (bytes > 0 && ref) {
                    char *a = aligned_alloc(64, bytes + 64), *b = aligned_alloc(64, bytes + 64);
                    memset(a, 1, bytes), memset(b, 2, bytes);
                    int m = iters < 200 ? 200 : iters;
                    unsigned long long *t = malloc(sizeof *t * m);
                    for (int i = 0; i < m; i++) {
                        unsigned long long t0 = __rdtsc();
                        memcpy(b, a, bytes);
                        __asm__ volatile("" ::"r"(b) : "memory");
                        t[i] = __rdtsc() - t0;
                    }
                    mc = median(t, m) / ghz;
                    free(t), free(a), free(b);
                }
                double med = 0, min = 0, st[STAGES] = {0};
                for (int r = 0; r < p; r++) {
                    med += res[r].med / p, min += res[r].min / p;
                    for (int k = 0; k < STAGES; k++) st[k] += res[r].stage[k] / p;
                }
                printf("%-22s %9ld %9.0f %9.0f", names[c], bytes, med, min);
                for (int k = 0; k < STAGES; k++) printf(" %9.0f", st[k]);
                printf(" %9.0f\n", mc);
                fflush(stdout);
            }
            gocoll_shm_barrier(&s);
            free(in), free(out);
            if (c == 3) break;
        }
    }
    if (rank == 0)
        while (wait(NULL) > 0) {
        }
    return 0;
}
