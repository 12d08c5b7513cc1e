/* Reproducible mode through the C ABI (run with GOCOLL_REPRODUCIBLE=1):
 * MPI_Allreduce, MPI_Reduce_scatter and MPI_Reduce_scatter_block of
 * doubles and floats whose sums and products depend on the order of the
 * terms, at counts around block and segment boundaries, in place and
 * not. Every rank computes every rank's input itself (they are a function
 * of rank and index), so it checks its result bit for bit against the
 * canonical association T(0, p) (algorithms/canonical.go: adjacent ranks
 * in pairs, then pairs of pairs, an odd one passing up) computed here.
 * It uses only standard MPI, so it runs on gocoll's mpi.h and, under
 * LD_PRELOAD, on Open MPI's and MPICH's. The last line of each rank
 * prints a checksum of every result, which the test compares between
 * runs (algorithms, transports, launchers). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, passed, failed;
static uint64_t checksum = 1469598103934665603ull;

static void fold(const void *buf, size_t n) {
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++) checksum = (checksum ^ b[i]) * 1099511628211ull;
}

/* input: a value of mixed magnitude and sign, or near 1 for products. */
static double input(int r, long i, int prod) {
    uint64_t x = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 7) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31, x *= 0x94d049bb133111ebull, x ^= x >> 29;
    double u = (double)(x >> 11) / 9007199254740992.0 - 0.5; /* [-0.5, 0.5) */
    if (prod) return 1.0 + u / 32;
    static const double scale[] = {1e-3, 1.0, 1e3, 1e6, 1e-6, 10.0, 1e9};
    return u * scale[x % 7];
}

/* canonical_d / canonical_f: T(lo, hi) of element i. */
static double canonical_d(int lo, int hi, long i, int prod) {
    if (hi - lo == 1) return input(lo, i, prod);
    int h = 1;
    while (2 * h < hi - lo) h *= 2;
    double a = canonical_d(lo, lo + h, i, prod), b = canonical_d(lo + h, hi, i, prod);
    return prod ? a * b : a + b;
}

static float canonical_f(int lo, int hi, long i, int prod) {
    if (hi - lo == 1) return (float)input(lo, i, prod);
    int h = 1;
    while (2 * h < hi - lo) h *= 2;
    float a = canonical_f(lo, lo + h, i, prod), b = canonical_f(lo + h, hi, i, prod);
    return prod ? a * b : a + b;
}

enum { ALLREDUCE, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK };
static const char *names[] = {"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block"};

/* one runs collective coll on n elements in all (for the reduce-scatters
 * about n, split in blocks), of doubles or floats, and checks the result. */
static void one(int coll, long n, int dbl, int prod, int inplace) {
    size_t es = dbl ? sizeof(double) : sizeof(float);
    int *counts = malloc(size * sizeof(int));
    long total = n, lo = 0, mine = n;
    if (coll != ALLREDUCE) {
        total = 0;
        for (int r = 0; r < size; r++) {
            counts[r] = coll == REDUCE_SCATTER_BLOCK ? (int)(n / size) : (int)(n / size * ((r + n) % 3) + (r == size - 1 ? n % 5 : 0));
            if (r < rank) lo += counts[r];
            total += counts[r];
        }
        mine = counts[rank];
    }
    char *send = malloc(total * es + 1), *recv = malloc(total * es + 1);
    for (long i = 0; i < total; i++) {
        if (dbl) ((double *)send)[i] = input(rank, i, prod);
        else ((float *)send)[i] = (float)input(rank, i, prod);
    }
    MPI_Datatype t = dbl ? MPI_DOUBLE : MPI_FLOAT;
    MPI_Op op = prod ? MPI_PROD : MPI_SUM;
    const void *sb = send;
    if (inplace) memcpy(recv, send, total * es), sb = MPI_IN_PLACE;
    int rc;
    if (coll == ALLREDUCE) rc = MPI_Allreduce(sb, recv, (int)total, t, op, MPI_COMM_WORLD);
    else if (coll == REDUCE_SCATTER) rc = MPI_Reduce_scatter(sb, recv, counts, t, op, MPI_COMM_WORLD);
    else rc = MPI_Reduce_scatter_block(sb, recv, counts[0], t, op, MPI_COMM_WORLD);
    long bad = -1;
    for (long i = 0; rc == MPI_SUCCESS && i < mine && bad < 0; i++) {
        long g = coll == ALLREDUCE ? i : lo + i;
        if (dbl) {
            double want = canonical_d(0, size, g, prod);
            if (memcmp(&want, (double *)recv + i, es)) bad = i;
        } else {
            float want = canonical_f(0, size, g, prod);
            if (memcmp(&want, (float *)recv + i, es)) bad = i;
        }
    }
    if (rc != MPI_SUCCESS || bad >= 0) {
        failed++;
        printf("rank %d: FAIL %s %s %s n=%ld inplace=%d: rc=%d, element %ld not canonical\n", rank, names[coll],
               dbl ? "MPI_DOUBLE" : "MPI_FLOAT", prod ? "MPI_PROD" : "MPI_SUM", n, inplace, rc, bad);
    } else {
        passed++;
    }
    fold(recv, mine * es);
    free(send), free(recv), free(counts);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long ns[] = {1, size - 1, size, size + 1, 37, 1000, 4099, 70001};
    for (int coll = 0; coll < 3; coll++)
        for (int k = 0; k < (int)(sizeof ns / sizeof ns[0]); k++)
            for (int v = 0; v < 4; v++)
                if (ns[k] > 0) one(coll, ns[k], v & 1, (v >> 1) & 1, (k + v) % 2);
    printf("rank %d: checksum %016llx\n", rank, (unsigned long long)checksum);
    printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
    MPI_Finalize();
    return failed != 0;
}
