package mpi_test

import (
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/mpi"
)

// The examples of device memory run on package fake's CUDA driver, a GPU
// made of host memory, installed for this test binary. In a real program
// the memory comes from cudaMalloc through cgo or a CUDA binding, and
// gocoll finds the real driver itself.
var gpuProc = func() *fake.Process {
	p := fake.NewMachine(fake.Options{}).NewProcess()
	p.AppInit(0) // the program has initialised CUDA on device 0
	rt, err := gpu.NewRuntime(p, gpu.Auto)
	if err != nil {
		panic(err)
	}
	gpu.Install(rt)
	return p
}()

// cudaMalloc, cudaMemcpyHtoD and cudaMemcpyDtoH stand for the program's
// own CUDA calls.
func cudaMalloc(n int) mpi.DevicePtr { return mpi.DevicePtr(gpuProc.Malloc(0, n)) }

func cudaMemcpyHtoD[T any](dst mpi.DevicePtr, src []T) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), len(src)*int(unsafe.Sizeof(src[0])))
	gpuProc.Write(uintptr(dst), b)
}

func cudaMemcpyDtoH[T any](src mpi.DevicePtr, n int) []T {
	var z T
	b := gpuProc.Read(uintptr(src), n*int(unsafe.Sizeof(z)))
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// Four ranks add up vectors that live in GPU memory; the sum lands in GPU
// memory on every rank.
func ExampleAllreduceDevice() {
	err := mpi.RunLocal(4, func(c *mpi.Comm) error {
		x, sum := cudaMalloc(3*4), cudaMalloc(3*4) // three float32 each
		cudaMemcpyHtoD(x, []float32{1, 2, float32(c.Rank())})
		if err := mpi.AllreduceDevice[float32](c, x, sum, 3, mpi.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println(cudaMemcpyDtoH[float32](sum, 3))
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [4 8 6]
}

// Every rank contributes a block from GPU memory and receives them all.
func ExampleAllgatherDevice() {
	err := mpi.RunLocal(3, func(c *mpi.Comm) error {
		mine, all := cudaMalloc(2*8), cudaMalloc(3*2*8) // int64s
		cudaMemcpyHtoD(mine, []int64{int64(c.Rank()), int64(10 * c.Rank())})
		if err := mpi.AllgatherDevice[int64](c, mine, all, 2); err != nil {
			return err
		}
		if c.Rank() == 2 {
			fmt.Println(cudaMemcpyDtoH[int64](all, 6))
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [0 0 1 10 2 20]
}

func uintptrOf[T any](s []T) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s))) }
