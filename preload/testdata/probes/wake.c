/*
 * wake.c: which threads of a rank run while it loops over one collective
 * in the pattern MPI suites time (an MPI_Barrier before every call): per
 * thread but the main one, the scheduler's time slices over the loop
 * (/proc/self/task/T/schedstat), and their sum per 1000 calls. Under
 * LD_PRELOAD those threads are the Go runtime's: none runs while the host
 * runs the calls; sysmon does while gocoll runs them.
 *
 *   mpicc.openmpi -O2 -o wake wake.c
 *   mpirun.openmpi -np 2 -x LD_PRELOAD=.../libgocoll-preload.so ./wake a 4 3
 *
 * Arguments: the collective (a MPI_Allreduce of MPI_FLOAT sums, g
 * MPI_Allgather of MPI_CHAR, r MPI_Reduce_scatter with recvcounts), the
 * size in bytes (allgather: per rank), the seconds to loop (after 500
 * warm-up calls and 50 ms of rest, so that the runtime's reaction to the
 * warm-up's first call, which enters Go to decide, is over). Linux only.
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAXT 128

struct th {
    int tid;
    unsigned long long slices;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int snap(struct th *t) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    char p[300];
    while (d && (e = readdir(d)) && n < MAXT) {
        if (e->d_name[0] == '.') continue;
        unsigned long long run, wait;
        t[n].tid = atoi(e->d_name), t[n].slices = 0;
        snprintf(p, sizeof p, "/proc/self/task/%s/schedstat", e->d_name);
        FILE *f = fopen(p, "r");
        if (f) {
            if (fscanf(f, "%llu %llu %llu", &run, &wait, &t[n].slices) != 3) t[n].slices = 0;
            fclose(f);
        }
        n++;
    }
    if (d) closedir(d);
    return n;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, np, me = getpid(); /* the main thread's tid */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    char coll = argc > 1 ? argv[1][0] : 'a';
    int bytes = argc > 2 ? atoi(argv[2]) : 4;
    double secs = argc > 3 ? atof(argv[3]) : 3;
    char *s = calloc(1, (size_t)bytes * np + 64), *r = calloc(1, (size_t)bytes * np + 64);
    int cnt = bytes / 4 > 0 ? bytes / 4 : 1, *counts = malloc(np * sizeof(int));
    for (int i = 0; i < np; i++) counts[i] = cnt / np > 0 ? cnt / np : 1;
#define CALL()                                                                                        \
    do {                                                                                              \
        MPI_Barrier(MPI_COMM_WORLD);                                                                  \
        if (coll == 'a') MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);               \
        else if (coll == 'g') MPI_Allgather(s, bytes, MPI_CHAR, r, bytes, MPI_CHAR, MPI_COMM_WORLD); \
        else MPI_Reduce_scatter(s, r, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);                   \
    } while (0)
    for (int i = 0; i < 500; i++) CALL();
    struct timespec rest = {0, 50000000};
    nanosleep(&rest, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    static struct th a[MAXT], b[MAXT];
    int na = snap(a), stop = 0;
    long calls = 0;
    double t0 = now();
    while (!stop) {
        for (int i = 0; i < 1000; i++) CALL();
        calls += 1000;
        int late = now() - t0 > secs;
        MPI_Allreduce(&late, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    double el = now() - t0;
    int nb = snap(b);
    unsigned long long total = 0;
    char line[4096];
    int off = snprintf(line, sizeof line, "%s rank %d %c %d B: %ld calls in %.2f s, %d threads; slices of the others:",
                       getenv("TAG") ? getenv("TAG") : "-", rank, coll, bytes, calls, el, nb);
    for (int j = 0; j < nb; j++) {
        if (b[j].tid == me) continue;
        unsigned long long before = 0;
        for (int i = 0; i < na; i++)
            if (a[i].tid == b[j].tid) before = a[i].slices;
        unsigned long long d = b[j].slices - before;
        total += d;
        if (d && off < (int)sizeof line - 32) off += snprintf(line + off, sizeof line - off, " %d:%llu", b[j].tid, d);
    }
    printf("%s; in all %llu (%.2f per 1000 calls)\n", line, total, total * 1000.0 / calls);
    free(s), free(r), free(counts);
    MPI_Finalize();
    return 0;
}
