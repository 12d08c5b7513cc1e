/* reduce_scatter: uneven blocks (rank r gets r+1 elements) of the sum of
 * x[i] = rank + i, then the block form. Every rank prints its own PASS or
 * FAIL and exits non-zero on a failure. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *counts = malloc(size * sizeof *counts), total = 0, start = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r + 1;
        if (r < rank) start += counts[r];
        total += counts[r];
    }
    long *x = malloc(total * sizeof *x), *mine = malloc(total * sizeof *mine);
    for (int i = 0; i < total; i++) x[i] = rank + i;
    MPI_Reduce_scatter(x, mine, counts, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < counts[rank]; i++)
        if (mine[i] != (long)size * (size - 1) / 2 + (long)size * (start + i)) bad++;
    /* block form: 3 elements each */
    long *y = malloc(3 * size * sizeof *y), blk[3];
    for (int i = 0; i < 3 * size; i++) y[i] = i * (rank + 1);
    MPI_Reduce_scatter_block(y, blk, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < 3; i++)
        if (blk[i] != (long)(3 * rank + i) * size * (size + 1) / 2) bad++;
    printf("reduce_scatter on %d ranks, rank %d: %s\n", size, rank, bad ? "FAIL" : "PASS");
    MPI_Finalize();
    return bad != 0;
}
