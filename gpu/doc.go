// Package gpu is gocoll's view of CUDA, loaded at run time: the driver
// API it uses (Driver, one method per cu* entry point, libcuda.so.1 opened
// with dlopen by cuda.c, so gocoll builds, loads and runs with no GPU and
// no CUDA installed), a process's Runtime (the driver once loaded, the
// GOCOLL_CUDA mode, and Classify: where a buffer lives, from
// cuPointerGetAttributes), the Buffer by which device memory travels from
// the entry that classified it to the executor, and the GPU reduction
// kernels, PTX compiled by the driver: the pairwise ones (kernels.go,
// written by hand) and the peer ones of the one-shot and two-shot device
// collectives (kernels_peer.go, generated).
//
// The device executor (executor/device) is its user; the test doubles
// of the driver live in gputest (fake: a CUDA driver made of host memory
// and goroutines; mockgpu: a gomock of Driver) and topology reads NVML
// for gocollrun --info. Package gpu imports nothing of gocoll's above ops
// (the layering test keeps it so).
package gpu
