// allreduce.cc: C++ over a host MPI (its mpicxx), with libgocoll-preload.so
// linked ahead of it (tests/linktime_test.go). Every rank contributes
// x[i] = rank + i and checks the sum, then the maximum in place; it
// prints its own PASS or FAIL and exits non-zero on a failure.
#include <mpi.h>

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = 517;
    std::vector<long> x(n), sum(n);
    for (int i = 0; i < n; i++) x[i] = rank + i;
    MPI_Allreduce(x.data(), sum.data(), n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (sum[i] != static_cast<long>(size) * (size - 1) / 2 + static_cast<long>(size) * i) bad++;
    MPI_Allreduce(MPI_IN_PLACE, x.data(), n, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        if (x[i] != size - 1 + i) bad++;
    std::printf("c++ allreduce on %d ranks, rank %d: %s\n", size, rank, bad ? "FAIL" : "PASS");
    MPI_Finalize();
    return bad != 0;
}
