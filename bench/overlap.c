/*
 * overlap: how much of a nonblocking collective a rank can hide behind
 * computation, measured as the OSU micro-benchmarks' osu_iallreduce does,
 * and (-p) what a persistent collective costs beside the blocking and
 * nonblocking forms. Written once, built with any MPI's mpicc (gocoll's,
 * mpicc.openmpi, mpicc.mpich), so the same source measures every library;
 * bench/overlap.sh runs the series.
 *
 *   overlap [-c iallreduce|iallgather] [-m MIN[:MAX]] [-f FACTOR] [-t SECONDS]
 *           [-i CALLS] [-w WARMUP] [-b BATCH] [-B] [-s mean|median] [-p] [-d]
 *
 * Sizes are bytes from MIN to MAX (default 4 KiB to 16 MiB), times FACTOR
 * (default 4) each step. iallreduce: MPI_Iallreduce of MPI_DOUBLE with
 * MPI_SUM, the size being the whole vector; iallgather: MPI_Iallgather of
 * MPI_CHAR, the size being what each rank contributes (as the OSU suite).
 *
 * Per size, three kinds of timed call, interleaved in batches of BATCH
 * calls (A B C, then C B A, ...) so that drift on a shared machine hits
 * all three alike:
 *   pure:  I<coll>; MPI_Wait
 *   cpu:   compute(target)
 *   total: I<coll>; compute(target); MPI_Wait
 * compute is a busy loop on doubles (no sleeping, no MPI call), calibrated
 * at start and re-aimed at each size's target; target is t_pure as a pilot run measured it (the slowest
 * rank's mean call, or its median with -s median). Then
 *   overlap% = max(0, min(100, 100 * (1 - (t_total - t_cpu) / t_pure)))
 * with t_cpu the compute measured alone, so that a progress thread that
 * slows the computation counts against overlap. t_comp is the compute
 * measured inside the total calls (what osu_iallreduce calls t_cpu).
 * With -d compute sleeps for its time instead: the work runs on a device
 * and the rank's core is free, which is what a progress thread can use
 * on a machine with no spare cores.
 *
 * -p instead times, interleaved the same way: the blocking call, the
 * persistent one (MPI_<Coll>_init once per size, timed apart as init_us;
 * then MPI_Start; MPI_Wait per call) and the nonblocking one (I<coll>;
 * MPI_Wait), and the ratio persistent/blocking.
 *
 * Every timed call follows an MPI_Barrier (the OSU pattern) unless -B
 * (back to back); only the call is timed. WARMUP calls of each kind
 * (default 5) come first; then CALLS of each kind, or (default) as many as
 * fill about SECONDS (default 0.2) per size, from a pilot run that all
 * ranks agree on. Times are each rank's mean per call, averaged over the
 * ranks; -s median takes each rank's median call instead, which a busy
 * machine's preemptions (milliseconds, here and there) move less. Rank 0
 * prints `# ` comment lines that say how it measured, one line per size,
 * and `check: PASS` or `check: FAIL` when one more call of each kind, into
 * a poisoned buffer, gave the right result on every rank (it exits
 * non-zero on FAIL).
 */
#include <mpi.h>
#if defined(OPEN_MPI) && MPI_VERSION < 4
#include <mpi-ext.h> /* Open MPI 4's persistent collectives: MPIX_*_init */
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if MPI_VERSION >= 4
#define ALLREDUCE_INIT MPI_Allreduce_init
#define ALLGATHER_INIT MPI_Allgather_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define ALLREDUCE_INIT MPIX_Allreduce_init
#define ALLGATHER_INIT MPIX_Allgather_init
#endif

enum kind { PURE, CPU, TOTAL, BLOCKING, PERSISTENT, NONBLOCKING };
static const char *kind_names[] = {"pure", "cpu", "total", "blocking", "persistent", "nonblocking"};

static int rank, size, gather, barrier = 1;
static long count;              /* elements: doubles in the vector, or chars per rank */
static void *sbuf, *rbuf;       /* sized for MAX */
static MPI_Request preq;        /* the persistent request of the current size */
static double units_per_s;      /* compute's calibration */
static double target;           /* seconds each compute runs */
static double comp_last;        /* compute time inside the last TOTAL call */
static int median;              /* -s median: each rank's median call, not its mean */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void check(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    fprintf(stderr, "overlap: rank %d: %s returned %d\n", rank, call, rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The computation: passes over a small array (it stays in L1, so it
 * neither evicts the collective's buffers nor waits on memory). Global, so
 * the compiler must do every pass. */
#define WORK 512
double work[WORK];

static void compute_units(long n) {
    for (long u = 0; u < n; u++)
        for (int i = 0; i < WORK; i++) work[i] = work[i] * 0.999999 + 1e-6;
}

/* -d: the computation runs elsewhere (a GPU) and the rank's core is idle
 * while it waits, as a training loop's host thread is during the backward
 * pass: compute sleeps instead of spinning. */
static int idle_compute;

static void compute(double seconds) {
    if (idle_compute) {
        struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
        nanosleep(&ts, NULL);
        return;
    }
    compute_units(lround(seconds * units_per_s));
}

/* calibrate sets units_per_s from the best of several timed runs (the
 * fastest is the one least disturbed by other processes). */
static void calibrate(void) {
    long n = 1;
    double best = 0;
    while (best < 1e-3) { /* find a run of at least a millisecond */
        n *= 2;
        double t0 = now();
        compute_units(n);
        best = now() - t0;
    }
    for (int i = 0; i < 5; i++) {
        double t0 = now();
        compute_units(n);
        double t = now() - t0;
        if (t < best) best = t;
    }
    units_per_s = n / best;
}

static void start_nonblocking(MPI_Request *r) {
    if (gather)
        check(MPI_Iallgather(sbuf, (int)count, MPI_CHAR, rbuf, (int)count, MPI_CHAR, MPI_COMM_WORLD, r), "MPI_Iallgather");
    else
        check(MPI_Iallreduce(sbuf, rbuf, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, r), "MPI_Iallreduce");
}

static void complete(MPI_Request *r) { check(MPI_Wait(r, MPI_STATUS_IGNORE), "MPI_Wait"); }

/* call runs one call of kind k and returns its time. */
static double call(enum kind k) {
    MPI_Request r;
    if (barrier) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t0 = now();
    switch (k) {
    case PURE:
    case NONBLOCKING:
        start_nonblocking(&r);
        complete(&r);
        break;
    case CPU:
        compute(target);
        break;
    case TOTAL: {
        start_nonblocking(&r);
        double c0 = now();
        compute(target);
        comp_last = now() - c0;
        complete(&r);
        break;
    }
    case BLOCKING:
        if (gather)
            check(MPI_Allgather(sbuf, (int)count, MPI_CHAR, rbuf, (int)count, MPI_CHAR, MPI_COMM_WORLD), "MPI_Allgather");
        else
            check(MPI_Allreduce(sbuf, rbuf, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        break;
    case PERSISTENT:
        check(MPI_Start(&preq), "MPI_Start");
        complete(&preq);
        break;
    }
    return now() - t0;
}

/* Values whose sums are exact in doubles, and a byte pattern per rank. */
static double xr(int r, long j) { return (r + 1) * (double)(j % 13 + 1); }
static char xg(int r, long j) { return (char)(r * 31 + j); }

/* verify runs one more call of kind k into a poisoned buffer and returns
 * the number of wrong elements. */
static long verify(enum kind k) {
    long n = gather ? count * size : count, bad = 0;
    memset(rbuf, 0xa5, (size_t)n * (gather ? 1 : sizeof(double)));
    call(k);
    for (long j = 0; j < n; j++) {
        if (gather) {
            if (((char *)rbuf)[j] != xg((int)(j / count), j % count)) bad++;
        } else if (((double *)rbuf)[j] != size * (size + 1) / 2 * (double)(j % 13 + 1))
            bad++;
    }
    return bad;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* stat is the mean of v[0..n) or its median (v gets sorted). */
static double stat(double *v, long n, int med) {
    double s = 0;
    if (med) {
        qsort(v, n, sizeof *v, cmp);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
    for (long i = 0; i < n; i++) s += v[i];
    return s / n;
}

static void usage(void) {
    if (rank == 0)
        fprintf(stderr, "usage: overlap [-c iallreduce|iallgather] [-m MIN[:MAX]] [-f FACTOR] [-t SECONDS]\n"
                        "               [-i CALLS] [-w WARMUP] [-b BATCH] [-B] [-s mean|median] [-p] [-d]\n");
}

/* fail prints msg (rank 0), finalizes and exits 2: every rank sees the
 * same arguments, so every rank gets here. */
static void fail(const char *msg, const char *arg) {
    if (rank == 0) fprintf(stderr, "overlap: %s%s\n", msg, arg);
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv) {
    long lo = 4096, hi = 16L << 20, factor = 4, calls = 0, warmup = 5, batch = 4;
    double seconds = 0.2;
    int persistent = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-p")) persistent = 1;
        else if (!strcmp(a, "-B")) barrier = 0;
        else if (!strcmp(a, "-d")) idle_compute = 1;
        else if (!v) { usage(); fail("missing value after ", a); }
        else if (!strcmp(a, "-c")) {
            if (!strcmp(v, "iallgather")) gather = 1;
            else if (strcmp(v, "iallreduce")) fail("unknown collective (iallreduce, iallgather): ", v);
            i++;
        } else if (!strcmp(a, "-m")) {
            int k = sscanf(argv[++i], "%ld:%ld", &lo, &hi);
            if (k == 1) hi = lo;
            if (k < 1 || lo < 1 || hi < lo) fail("bad -m (want MIN[:MAX] bytes, 1 <= MIN <= MAX): ", v);
        } else if (!strcmp(a, "-f")) factor = atol(argv[++i]);
        else if (!strcmp(a, "-t")) seconds = atof(argv[++i]);
        else if (!strcmp(a, "-i")) calls = atol(argv[++i]);
        else if (!strcmp(a, "-w")) warmup = atol(argv[++i]);
        else if (!strcmp(a, "-b")) batch = atol(argv[++i]);
        else if (!strcmp(a, "-s")) {
            if (!strcmp(v, "median")) median = 1;
            else if (strcmp(v, "mean")) fail("bad -s (mean, median): ", v);
            i++;
        }
        else { usage(); fail("unknown argument ", a); }
    }
    if (factor < 2 || calls < 0 || warmup < 0 || batch < 1 || !(seconds > 0))
        fail("want -f >= 2, -i >= 0 (0: from -t), -w >= 0, -b >= 1, -t > 0", "");
    if (hi > (gather ? 1L << 30 : 8L << 30)) fail("-m: MAX too large for an int count", "");
#ifndef ALLREDUCE_INIT
    if (persistent) fail("this MPI has no persistent collectives (MPI_Allreduce_init): ", "-p");
#endif
    const char *coll = gather ? "MPI_Iallgather" : "MPI_Iallreduce";
    sbuf = malloc(gather ? hi : hi / 8 * 8);
    rbuf = malloc(gather ? hi * size : hi / 8 * 8);
    if (!sbuf || !rbuf) fail("out of memory", "");
    for (long j = 0; j < (gather ? hi : hi / 8); j++) {
        if (gather) ((char *)sbuf)[j] = xg(rank, j);
        else ((double *)sbuf)[j] = xr(rank, j);
    }
    for (int i = 0; i < WORK; i++) work[i] = i;
    calibrate();

    enum kind kinds[3] = {PURE, CPU, TOTAL};
    if (persistent) kinds[0] = BLOCKING, kinds[1] = PERSISTENT, kinds[2] = NONBLOCKING;
    if (rank == 0) {
        printf("# overlap: %s, %s, %s; np=%d\n", coll, gather ? "MPI_CHAR" : "MPI_DOUBLE, MPI_SUM",
               gather ? "size per-rank (bytes each rank contributes; the result is np times larger)"
                      : "size total (bytes of the whole vector)",
               size);
        printf("# %s; %ld warm-up calls of each kind, then ", barrier ? "MPI_Barrier before every call, only the call timed" : "calls back to back (no barrier)", warmup);
        if (calls) printf("%ld calls of each kind", calls);
        else printf("as many calls of each kind as fill about %.2f s per size", seconds);
        printf(", interleaved in batches of %ld (%s, %s, %s then the reverse); time per call: each rank's %s, averaged over ranks\n",
               batch, kind_names[kinds[0]], kind_names[kinds[1]], kind_names[kinds[2]], median ? "median" : "mean");
        if (persistent) {
            printf("# blocking: %s; persistent: %s once per size (init_us), then MPI_Start, MPI_Wait; nonblocking: %s, MPI_Wait\n",
                   gather ? "MPI_Allgather" : "MPI_Allreduce", gather ? "MPI_Allgather_init" : "MPI_Allreduce_init", coll);
            printf("# bytes blocking_us persistent_us nonblocking_us persistent/blocking init_us calls\n");
        } else {
            if (idle_compute)
                printf("# compute: a sleep (-d: the work runs on a device, the core is idle) for t_pure as a pilot measured it (%s of the slowest rank)\n", median ? "median" : "mean");
            else
                printf("# compute: busy loop on doubles, %.0f passes/ms on rank 0, run for t_pure as a pilot measured it (%s of the slowest rank)\n", units_per_s / 1e3, median ? "median" : "mean");
            printf("# overlap%% = max(0, min(100, 100*(1 - (t_total - t_cpu)/t_pure))); t_cpu: compute alone; "
                   "t_comp: compute inside the total calls (osu_iallreduce's t_cpu)\n");
            printf("# bytes t_pure_us t_total_us t_cpu_us overlap_pct t_comp_us calls\n");
        }
        fflush(stdout);
    }

    long bad = 0;
    for (long bytes = lo; bytes <= hi; bytes *= factor) {
        count = gather ? bytes : bytes / 8;
        if (count == 0) {
            if (rank == 0) printf("# %ld: skipped, no whole MPI_DOUBLE\n", bytes);
            continue;
        }
        double init = 0;
        if (persistent) {
#ifdef ALLREDUCE_INIT
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            if (gather)
                check(ALLGATHER_INIT(sbuf, (int)count, MPI_CHAR, rbuf, (int)count, MPI_CHAR, MPI_COMM_WORLD, MPI_INFO_NULL, &preq),
                      "MPI_Allgather_init");
            else
                check(ALLREDUCE_INIT(sbuf, rbuf, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &preq),
                      "MPI_Allreduce_init");
            init = now() - t0;
#endif
        }
        target = 0;
        for (long w = 0; w < warmup; w++)
            for (int k = 0; k < 3; k++) call(kinds[k]);

        /* The pilot: nonblocking calls, 1, 4, 16, ... until they take a
         * tenth of the size's time (at most 20 ms) on the slowest rank,
         * which every rank learns, so that all agree on the count. Not
         * needed for -p with -i. */
        double pilot = 0, enough = seconds / 10 < 0.02 ? seconds / 10 : 0.02;
        for (long n = 1; !(persistent && calls); n *= 4) {
            double *v = malloc(n * sizeof *v), mine[3] = {0, 0, 0}, most[3];
            for (long j = 0; j < n; j++) mine[0] += v[j] = call(PURE);
            mine[1] = stat(v, n, median);
            mine[2] = stat(v, n, 1); /* the count: a preemption in the pilot must not cut it to one */
            free(v);
            MPI_Allreduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            target = persistent ? 0 : most[1];
            pilot = most[2];
            if (most[0] >= enough || n >= 1 << 16) break;
        }
        /* Re-aim the computation at target: the calibration drifts as the
         * machine's load (or an MPI's progress thread) changes. */
        for (int r = 0; r < 3 && target > 0; r++) {
            double v[5];
            for (int j = 0; j < 5; j++) {
                double t0 = now();
                compute(target);
                v[j] = now() - t0;
            }
            double m = stat(v, 5, 1);
            if (m > 0) units_per_s *= target / m;
        }
        long n = calls;
        if (!n) {
            n = (long)(seconds / (3 * pilot)); /* the three kinds each cost about a pilot call */
            if (n > 100000) n = 100000;
            if (n < 1) n = 1;
        }

        double *t[4]; /* each kind's calls, and the compute inside TOTAL's */
        for (int k = 0; k < 4; k++) t[k] = malloc(n * sizeof(double));
        for (long done = 0, round = 0; done < n; done += batch, round++) {
            long b = n - done < batch ? n - done : batch;
            for (int k = 0; k < 3; k++) {
                int kk = round % 2 ? 2 - k : k;
                for (long j = done; j < done + b; j++) {
                    t[kk][j] = call(kinds[kk]);
                    if (kinds[kk] == TOTAL) t[3][j] = comp_last;
                }
            }
        }
        for (int k = 0; k < 3; k++) {
            long wrong = kinds[k] == CPU ? 0 : verify(kinds[k]);
            if (wrong) fprintf(stderr, "overlap: rank %d: %ld wrong elements after a %s call of %ld bytes\n", rank, wrong, kind_names[kinds[k]], bytes);
            bad += wrong;
        }
        if (persistent) check(MPI_Request_free(&preq), "MPI_Request_free");

        double mine[5] = {stat(t[0], n, median), stat(t[1], n, median), stat(t[2], n, median),
                           persistent ? 0 : stat(t[3], n, median), init}, avg[5];
        for (int k = 0; k < 4; k++) free(t[k]);
        MPI_Reduce(mine, avg, 5, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            for (int k = 0; k < 5; k++) avg[k] *= 1e6 / size;
            if (persistent)
                printf("%ld %.2f %.2f %.2f %.3f %.2f %ld\n", bytes, avg[0], avg[1], avg[2], avg[1] / avg[0], avg[4], n);
            else {
                double ov = 100 * (1 - (avg[2] - avg[1]) / avg[0]);
                ov = ov < 0 ? 0 : ov > 100 ? 100 : ov;
                printf("%ld %.2f %.2f %.2f %.1f %.2f %ld\n", bytes, avg[0], avg[2], avg[1], ov, avg[3], n);
            }
            fflush(stdout);
        }
    }
    long allbad = 0;
    MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("check: %s\n", allbad ? "FAIL" : "PASS");
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return allbad != 0 || bad != 0;
}
