/* allgather: every rank contributes {rank, -rank}; everyone checks the
 * gathered vector, then again in place. Every rank prints its own PASS
 * or FAIL and exits non-zero on a failure. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int mine[2] = {rank, -rank}, *all = malloc(2 * size * sizeof *all);
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        if (all[2 * r] != r || all[2 * r + 1] != -r) bad++;
    for (int i = 0; i < 2 * size; i++) all[i] = -1;
    all[2 * rank] = 7 * rank;
    all[2 * rank + 1] = 8 * rank;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        if (all[2 * r] != 7 * r || all[2 * r + 1] != 8 * r) bad++;
    printf("allgather on %d ranks, rank %d: %s\n", size, rank, bad ? "FAIL" : "PASS");
    MPI_Finalize();
    return bad != 0;
}
