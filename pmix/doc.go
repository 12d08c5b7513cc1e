// Package pmix is a PMIx client for gocoll's bootstrap: rank, size, node
// map and an allgather from the PMIx server that started the process
// (Open MPI's mpirun, Slurm's srun --mpi=pmix).
//
// The PMIx library (libpmix.so.2) is loaded with dlopen when Init is
// called, as the CUDA driver is: gocoll builds and links without PMIx, and
// a machine without it only sees Init fail. pmix_abi.h declares the part
// of PMIx's ABI that is used; abi_test.go compares it with the real
// header where libpmix-dev is installed.
package pmix
