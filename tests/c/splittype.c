/*
 * splittype: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) on emulated hosts.
 * argv[1] names the host of each world rank ("0011": ranks 0 and 1 on one
 * host, 2 and 3 on another), as the test placed them with gocollrun's
 * --host (GOCOLL_HOST). The test runs it with
 * GOCOLL_ALLREDUCE_ALGORITHM=shm and GOCOLL_FALLBACK=error, so that an
 * allreduce succeeds only on a communicator with a shared segment.
 *
 * On MPI_COMM_WORLD and on both halves of a split by parity it checks
 * that each rank's node communicator holds exactly the ranks of its host,
 * in key order (keys reverse the order), that an allreduce on it runs on
 * the shared segment (the shm algorithm or the C fast path, by gocoll's
 * counters) and is right, small and large; that an allreduce on a
 * communicator spanning hosts is refused (no segment) and one on a single
 * host is not; MPI_UNDEFINED gives MPI_COMM_NULL; an unknown split_type
 * and a NULL newcomm are MPI_ERR_ARG. With "fatal" as argv[2] it calls
 * with an unknown split_type under MPI_ERRORS_ARE_FATAL, which must end
 * the job with a message naming the call and the argument.
 * Each rank prints `rank R: N passed, N failed` and exits non-zero on
 * its own failures.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gocoll_counters.h"

static const char *hosts;

#include "check.h"

/* onSegment counts the allreduces that ran on a shared segment. */
static long long onSegment(void) {
    return gocoll_test_counter("MPI_Allreduce.shm") + gocoll_test_counter("MPI_Allreduce.fast");
}

/* sameHost reports whether every world rank in members shares a host. */
static int sameHost(const int *members, int n) {
    for (int i = 1; i < n; i++)
        if (hosts[members[i]] != hosts[members[0]]) return 0;
    return 1;
}

/* checkAllreduce sums world ranks over comm (whose ranks are the world
 * ranks members) with the shm algorithm forced: it must work, on the
 * segment, where they share a host and more than one, and be refused
 * where they span hosts. */
static void checkAllreduce(const char *what, MPI_Comm comm, const int *members, int n) {
    int want = 0;
    for (int i = 0; i < n; i++) want += members[i];
    if (n == 1) return; /* a one-rank communicator has no segment to test */
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (!sameHost(members, n)) {
        int x = rank, y = -1;
        int rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, comm);
        CHECK(rc == MPI_ERR_ARG, "%s spans hosts: allreduce forced to shm returned %d, want MPI_ERR_ARG", what, rc);
        return;
    }
    long long before = onSegment();
    int x = rank, y = -1;
    int rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, comm);
    CHECK(rc == MPI_SUCCESS && y == want, "%s: small allreduce rc %d sum %d, want %d", what, rc, y, want);
    enum { big = 1 << 16 };
    int *in = malloc(big * sizeof(int)), *out = malloc(big * sizeof(int));
    for (int i = 0; i < big; i++) in[i] = rank + i;
    rc = MPI_Allreduce(in, out, big, MPI_INT, MPI_SUM, comm);
    int bad = 0;
    for (int i = 0; i < big; i++) bad += out[i] != want + n * i;
    CHECK(rc == MPI_SUCCESS && bad == 0, "%s: large allreduce rc %d, %d wrong elements", what, rc, bad);
    free(in);
    free(out);
    long long ran = onSegment() - before;
    CHECK(ran == 2, "%s: %lld of 2 allreduces ran on the shared segment", what, ran);
}

/* checkSplitType splits comm (whose rank i is world rank members[i]) by
 * node with keys reversing the order, and checks the result. */
static void checkSplitType(const char *what, MPI_Comm comm, const int *members, int n) {
    int me;
    MPI_Comm_rank(comm, &me);
    MPI_Comm node;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, -me, MPI_INFO_NULL, &node);
    CHECK(rc == MPI_SUCCESS && node != MPI_COMM_NULL, "%s: MPI_Comm_split_type rc %d", what, rc);
    if (rc != MPI_SUCCESS || node == MPI_COMM_NULL) return;
    /* Expected: the members on my host, in reverse order of rank in comm. */
    int want[64], nwant = 0;
    for (int i = n - 1; i >= 0; i--)
        if (hosts[members[i]] == hosts[rank]) want[nwant++] = members[i];
    int nsize = -1, nrank = -1;
    MPI_Comm_size(node, &nsize);
    MPI_Comm_rank(node, &nrank);
    CHECK(nsize == nwant, "%s: node communicator of %d ranks, want %d", what, nsize, nwant);
    if (nsize != nwant) {
        MPI_Comm_free(&node);
        return;
    }
    int got[64];
    MPI_Allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, node);
    int same = 1;
    for (int i = 0; i < nwant; i++) same &= got[i] == want[i];
    CHECK(same && got[nrank] == rank, "%s: node communicator holds world ranks %d.. (rank %d), want %d..", what,
          got[0], nrank, want[0]);
    char name[128];
    snprintf(name, sizeof name, "%s's node", what);
    checkAllreduce(name, node, want, nwant);
    /* A node communicator splits into itself. */
    MPI_Comm again;
    rc = MPI_Comm_split_type(node, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &again);
    int asize = -1;
    if (rc == MPI_SUCCESS) MPI_Comm_size(again, &asize);
    CHECK(rc == MPI_SUCCESS && asize == nwant, "%s: split_type of the node communicator: rc %d size %d", what, rc, asize);
    if (rc == MPI_SUCCESS) MPI_Comm_free(&again);
    MPI_Comm_free(&node);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || (int)strlen(argv[1]) != size || size > 64) {
        fprintf(stderr, "usage: splittype HOSTS (one character per rank, %d ranks)\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    hosts = argv[1];
    if (argc > 2 && !strcmp(argv[2], "fatal")) {
        /* Under MPI_ERRORS_ARE_FATAL an unknown split_type ends the job,
         * with a message the test reads. */
        MPI_Comm bad;
        MPI_Comm_split_type(MPI_COMM_WORLD, 99, 0, MPI_INFO_NULL, &bad);
        printf("rank %d: the refused call returned\n", rank);
        MPI_Finalize();
        return 1;
    }
    int world[64];
    for (int i = 0; i < size; i++) world[i] = i;

    checkAllreduce("MPI_COMM_WORLD", MPI_COMM_WORLD, world, size);
    checkSplitType("MPI_COMM_WORLD", MPI_COMM_WORLD, world, size);

    /* The halves of a split by parity: their maps derive from the world's. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int members[64], n = 0;
    for (int i = rank % 2; i < size; i += 2) members[n++] = i;
    checkAllreduce(rank % 2 ? "odd half" : "even half", half, members, n);
    checkSplitType(rank % 2 ? "odd half" : "even half", half, members, n);
    MPI_Comm_free(&half);

    /* MPI_UNDEFINED on odd ranks: they join nothing, the others one
     * communicator per node. */
    MPI_Comm some;
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, rank % 2 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &some);
    CHECK(rc == MPI_SUCCESS && (rank % 2 ? some == MPI_COMM_NULL : some != MPI_COMM_NULL),
          "MPI_UNDEFINED split_type on odd ranks: rc %d, comm %#x", rc, (unsigned)some);
    if (rc == MPI_SUCCESS && some != MPI_COMM_NULL) MPI_Comm_free(&some);

    /* Errors, local to each rank: nothing collective happens. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm bad = MPI_COMM_WORLD;
    rc = MPI_Comm_split_type(MPI_COMM_WORLD, 99, 0, MPI_INFO_NULL, &bad);
    CHECK(rc == MPI_ERR_ARG && bad == MPI_COMM_WORLD, "unknown split_type: rc %d", rc);
    rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, NULL);
    CHECK(rc == MPI_ERR_ARG, "NULL newcomm: rc %d", rc);

    printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
    MPI_Finalize();
    return failed ? 1 : 0;
}
