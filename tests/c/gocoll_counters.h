/*
 * gocoll's test hook for its path counters: not MPI, and not in mpi.h.
 *
 * gocoll_test_counter returns the counter named by key, "<call>.<counter>"
 * (e.g. "MPI_Allreduce.fast", "MPI_Allreduce.go", "MPI_Allreduce.ring",
 * "MPI_Allreduce.fallback"), of this process: 0 if it never moved, -1 for
 * an unknown call or counter name. fast counts the calls the C fast path
 * completed without entering Go, go those gocoll's Go half ran, and each
 * algorithm's name the calls it ran (they add up to go); GOCOLL_REPORT=1
 * prints the same counters at MPI_Finalize. libgocoll.so exports it;
 * a program that may run on another MPI can look it up with
 * dlsym(RTLD_DEFAULT, "gocoll_test_counter") instead.
 */
#ifndef GOCOLL_COUNTERS_H
#define GOCOLL_COUNTERS_H
long long gocoll_test_counter(const char *key);
#endif
