/*
 * device.c: calls with CUDA device buffers go to the host MPI. The CUDA
 * driver is faked (fakecuda.c, argv[1]) and loaded after the first
 * collective, as a program may load it late; a buffer it marks as device
 * memory must make the next call fall back, and the one after, on host
 * memory, run in gocoll again.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double host[64], dev[64], out[64];
    for (int i = 0; i < 64; i++) host[i] = dev[i] = rank + i;
    ok &= MPI_Allreduce(host, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int i = 0; i < 64; i++) ok &= out[i] == size * (size - 1) / 2.0 + size * i;
    void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
    void (*mark)(void *, size_t) = h ? (void (*)(void *, size_t))dlsym(h, "fake_cuda_mark") : NULL;
    if (!mark) {
        fprintf(stderr, "device: cannot load the fake CUDA driver %s\n", argc > 1 ? argv[1] : "(none)");
        ok = 0;
    } else {
        mark(dev, sizeof dev);
    }
    /* The device buffer as input, then as output. */
    ok &= MPI_Allreduce(dev, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int i = 0; i < 64; i++) ok &= out[i] == size * (size - 1) / 2.0 + size * i;
    ok &= MPI_Allreduce(host, dev, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int i = 0; i < 64; i++) ok &= dev[i] == size * (size - 1) / 2.0 + size * i;
    ok &= MPI_Allreduce(host, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int i = 0; i < 64; i++) ok &= out[i] == size * (size - 1) / 2.0 + size * i;
    int all = 0;
    MPI_Reduce(&ok, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("expect gocoll=%d host=%d\n", 2 * size, 2 * size);
        printf("%d passed, %d failed\n", all, size - all);
    }
    MPI_Finalize();
    return !ok; /* each rank's own verdict, whatever the sum says */
}
