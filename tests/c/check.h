/*
 * The C tests' checks: CHECK counts a passed or failed condition (a
 * failure prints the rank, the file and line, and the message), OK checks
 * that an MPI call returned MPI_SUCCESS. Each test prints
 * "rank R: N passed, N failed" (or its own summary) from passed and failed.
 * Included once, by the test's one source file, after <stdio.h> and mpi.h.
 */
#ifndef GOCOLL_TESTS_CHECK_H
#define GOCOLL_TESTS_CHECK_H

static int passed, failed, rank, size;

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (cond) {                                                                 \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
        }                                                                           \
    } while (0)

#define OK(call) CHECK((call) == MPI_SUCCESS, "%s failed", #call)

#endif
