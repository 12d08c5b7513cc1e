package main

/*
#include "mpi.h"
*/
import "C"

import (
	"os"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/mpierr"
)

// The CUDA support queries: MPICH's MPIX_GPU_query_support and
// MPIX_Query_<gpu>_support, and Open MPI's MPIX_Query_cuda_support
// (mpi-ext.h). They answer whether this process takes CUDA device
// memory now, which every call that takes a buffer then does.

// cudaUsable reports whether CUDA device memory is accepted: the job's
// runtime exists (the driver loaded, GOCOLL_CUDA not off). Before
// MPI_Init, the runtime MPI_Init will have (the driver is loaded now, as
// MPI_Init would, and kept for it). Open MPI asks programs to call after
// MPI_Init; MPICH allows before.
func cudaUsable() bool {
	lib.Lock()
	cfg := lib.cfg
	lib.Unlock()
	if cfg != nil {
		return cfg.Device.Runtime != nil
	}
	set, err := envvar.Parse(os.Getenv)
	if err != nil {
		return false // MPI_Init will say why
	}
	var c coll.Config
	return c.LoadDevice(set) == nil && c.Device.Runtime != nil
}

//export gocoll_GPU_query_support
func gocoll_GPU_query_support(gpuType C.int, isSupported *C.int) (rc C.int) {
	const call = "MPIX_GPU_query_support"
	defer guard(call, &rc)
	if isSupported == nil {
		return fail(nil, argNull(call, "is_supported"))
	}
	switch gpuType {
	case C.MPIX_GPU_SUPPORT_CUDA:
		*isSupported = cbool(cudaUsable())
	case C.MPIX_GPU_SUPPORT_ZE, C.MPIX_GPU_SUPPORT_HIP:
		*isSupported = 0
	default:
		*isSupported = 0
		return fail(nil, mpierr.New(call, mpierr.Arg, "unknown gpu_type %d (MPIX_GPU_SUPPORT_CUDA, _ZE or _HIP)", int(gpuType)))
	}
	return C.MPI_SUCCESS
}

//export gocoll_Query_cuda_support
func gocoll_Query_cuda_support() (rc C.int) {
	defer guard("MPIX_Query_cuda_support", &rc)
	return cbool(cudaUsable())
}

//export gocoll_Query_ze_support
func gocoll_Query_ze_support() (rc C.int) {
	defer guard("MPIX_Query_ze_support", &rc)
	return 0
}

//export gocoll_Query_hip_support
func gocoll_Query_hip_support() (rc C.int) {
	defer guard("MPIX_Query_hip_support", &rc)
	return 0
}
