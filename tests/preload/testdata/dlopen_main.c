/*
 * dlopen_main.c: an application that is not linked with MPI and loads an
 * MPI-using library with RTLD_LOCAL, as Python loads mpi4py: libmpi is
 * then outside the global symbol scope when the program starts. The
 * preload library must still find the host MPI and run the collectives.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_main LIB\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*run)(void) = (int (*)(void))dlsym(h, "run");
    return run ? run() : 2;
}
