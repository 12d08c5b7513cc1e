/*
 * canary: one collective whose counts disagree between ranks, without
 * GOCOLL_CHECK. The call may fail or complete (with whatever lands in
 * the receive buffer), but it must not write outside the buffers the
 * caller passed, nor into the send buffer, nor crash, nor hang.
 *
 *   canary -case NAME -n N
 *
 * Every buffer is allocated on its own pages: it ends exactly at a page
 * that is mapped PROT_NONE (a write past its end is a SIGSEGV), and the
 * 4 KiB before it are canary bytes (a write before its start shows).
 * The last rank passes the odd counts; the others N elements. Cases:
 *
 *   allreduce-short, allreduce-long       count N-3 / N+5 on the last rank
 *   allreduce-zero                        count 0 on the last rank
 *   rsb-short, rsb-long                   recvcount N-1 / N+2
 *   rs-shifted                            recvcounts shifted by one rank
 *   rs-long                               recvcounts[0] larger
 *   allgather-short, allgather-long       count N-1 / N+3
 *   allgatherv-long                       recvcounts[last] larger
 *
 * Each rank prints `rank R: rc C, buffers intact` or `rank R: CORRUPT
 * ...`, then exits without MPI_Finalize (the communicator may be out of
 * step after a mismatch).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CANARY 0xA5

static int rank, size;

struct guarded {
    unsigned char *base; /* the mapping */
    size_t len, total;
    unsigned char *buf; /* len bytes ending at the guard page */
};

static struct guarded guarded(size_t len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t body = (len + 4096 + page - 1) / page * page;
    struct guarded g;
    g.total = body + page;
    g.base = mmap(NULL, g.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.base == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    mprotect(g.base + body, page, PROT_NONE);
    memset(g.base, CANARY, body);
    g.len = len;
    g.buf = g.base + body - len;
    return g;
}

/* intact reports whether the canaries before buf still hold. */
static int intact(struct guarded *g) {
    for (unsigned char *p = g->base; p < g->buf; p++)
        if (*p != CANARY) {
            printf("rank %d: CORRUPT: byte %ld before the buffer was written\n", rank, (long)(p - g->buf));
            return 0;
        }
    return 1;
}

int main(int argc, char **argv) {
    const char *c = "allreduce-short";
    long n = 100;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-case") && i + 1 < argc) c = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atol(argv[++i]);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int odd = rank == size - 1;
    long count = n;
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) counts[q] = (int)n;
    long sendn, recvn; /* elements in this rank's buffers */
    if (!strncmp(c, "allreduce", 9)) {
        if (odd) count = !strcmp(c, "allreduce-short") ? n - 3 : !strcmp(c, "allreduce-long") ? n + 5 : 0;
        sendn = recvn = count;
    } else if (!strncmp(c, "rsb", 3)) {
        if (odd) count = !strcmp(c, "rsb-short") ? n - 1 : n + 2;
        sendn = count * size, recvn = count;
    } else if (!strncmp(c, "rs-", 3)) {
        if (odd && !strcmp(c, "rs-shifted")) counts[0]--, counts[size - 1]++;
        if (odd && !strcmp(c, "rs-long")) counts[0] += 7;
        sendn = 0;
        for (int q = 0; q < size; q++) sendn += counts[q];
        recvn = counts[rank];
    } else if (!strncmp(c, "allgatherv", 10)) {
        if (odd) counts[size - 1] += 9;
        recvn = 0;
        for (int q = 0; q < size; q++) displs[q] = (int)recvn, recvn += counts[q];
        sendn = counts[rank];
    } else {
        if (odd) count = !strcmp(c, "allgather-short") ? n - 1 : n + 3;
        sendn = count, recvn = count * size;
    }
    struct guarded s = guarded(sizeof(int) * sendn), r = guarded(sizeof(int) * recvn);
    for (long i = 0; i < sendn; i++) ((int *)s.buf)[i] = (int)(rank * 1000 + i);
    int rc;
    if (!strncmp(c, "allreduce", 9)) rc = MPI_Allreduce(s.buf, r.buf, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strncmp(c, "rsb", 3)) rc = MPI_Reduce_scatter_block(s.buf, r.buf, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strncmp(c, "rs-", 3)) rc = MPI_Reduce_scatter(s.buf, r.buf, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strncmp(c, "allgatherv", 10)) rc = MPI_Allgatherv(s.buf, (int)sendn, MPI_INT, r.buf, counts, displs, MPI_INT, MPI_COMM_WORLD);
    else rc = MPI_Allgather(s.buf, (int)count, MPI_INT, r.buf, (int)count, MPI_INT, MPI_COMM_WORLD);
    int ok = intact(&s) && intact(&r);
    for (long i = 0; i < sendn && ok; i++)
        if (((int *)s.buf)[i] != (int)(rank * 1000 + i)) {
            printf("rank %d: CORRUPT: the send buffer changed at element %ld\n", rank, i);
            ok = 0;
        }
    int cls = rc;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (ok) printf("rank %d: rc %d, buffers intact\n", rank, cls);
    fflush(stdout);
    _exit(ok ? 0 : 1);
}
