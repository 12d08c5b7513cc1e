/*
 * collbench: an OSU-style latency benchmark of MPI_Allreduce,
 * MPI_Reduce_scatter_block and MPI_Allgather, written once and built
 * against any MPI (gocoll's mpicc, mpicc.openmpi, mpicc.mpich), so that
 * the same source measures every library.
 *
 *   collbench [-c allreduce,reduce_scatter_block,allgather] [-m MIN:MAX]
 *             [-i ITERS] [-w WARMUP] [-check]
 *
 * Sizes are in bytes of float data: the whole vector for MPI_Allreduce
 * and MPI_Reduce_scatter_block, the whole output for MPI_Allgather. Each
 * line printed by rank 0 is `collective bytes avg_us min_us max_us`, the
 * per-call time averaged over iterations, then the average, minimum and
 * maximum over ranks (as the OSU micro-benchmarks report them). Fewer
 * iterations are run for large messages. -check verifies every result.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static int iterations(long bytes, int iters) {
    if (bytes >= (1L << 22)) return iters / 20 > 2 ? iters / 20 : 2;
    if (bytes >= (1L << 18)) return iters / 5 > 5 ? iters / 5 : 5;
    return iters;
}

/* run times one collective at one size; returns the per-call seconds. */
static double run(const char *coll, long bytes, int iters, int warmup, int check, int *bad) {
    long n = bytes / sizeof(float);
    if (n < size) n = size;
    n -= n % size;
    float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    for (long i = 0; i < n; i++) in[i] = (float)(rank + (i % 7));
    double t = 0;
    for (int it = -warmup; it < iterations(bytes, iters); it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (!strcmp(coll, "allreduce"))
            MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else if (!strcmp(coll, "reduce_scatter_block"))
            MPI_Reduce_scatter_block(in, out, (int)(n / size), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else
            MPI_Allgather(in, (int)(n / size), MPI_FLOAT, out, (int)(n / size), MPI_FLOAT, MPI_COMM_WORLD);
        if (it >= 0) t += MPI_Wtime() - t0;
    }
    if (check) {
        float sumr = (float)size * (size - 1) / 2;
        if (!strcmp(coll, "allreduce")) {
            for (long i = 0; i < n; i++)
                if (out[i] != sumr + size * (float)(i % 7)) { (*bad)++; break; }
        } else if (!strcmp(coll, "reduce_scatter_block")) {
            for (long i = 0; i < n / size; i++)
                if (out[i] != sumr + size * (float)((rank * (n / size) + i) % 7)) { (*bad)++; break; }
        } else {
            for (long i = 0; i < n; i++)
                if (out[i] != (float)(i / (n / size) + ((i % (n / size)) % 7))) { (*bad)++; break; }
        }
    }
    free(in);
    free(out);
    return t / iterations(bytes, iters);
}

int main(int argc, char **argv) {
    const char *colls = "allreduce,reduce_scatter_block,allgather";
    long lo = 8, hi = 16L << 20;
    int iters = 200, warmup = 10, check = 0, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc) colls = argv[++i];
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) sscanf(argv[++i], "%ld:%ld", &lo, &hi);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-check")) check = 1;
    }
    char *list = strdup(colls);
    for (char *coll = strtok(list, ","); coll; coll = strtok(NULL, ",")) {
        for (long bytes = lo; bytes <= hi; bytes *= 2) {
            double t = run(coll, bytes, iters, warmup, check, &bad), sum, mn, mx;
            MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&t, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
            MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) printf("%s %ld %.2f %.2f %.2f\n", coll, bytes, 1e6 * sum / size, 1e6 * mn, 1e6 * mx);
            fflush(stdout);
        }
    }
    int allbad;
    MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (check && rank == 0) printf("check: %s\n", allbad ? "FAIL" : "PASS");
    free(list);
    MPI_Finalize();
    return allbad != 0;
}
