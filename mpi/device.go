package mpi

import (
	"unsafe"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/mpierr"
)

// DevicePtr is the address of CUDA device memory (cudaMalloc,
// cuMemAlloc) or managed memory (cudaMallocManaged), as a Go program gets
// it from its CUDA binding. gocoll never reads it with the CPU: the
// ...Device collectives run on GPU memory through the device executor
// (staging through pinned host memory, CUDA IPC between processes of one
// node, reductions in GPU kernels), with the CUDA driver gocoll loads
// itself (GOCOLL_CUDA).
//
// The program must have initialised CUDA (it allocated the memory), and
// the GPU work that writes a send buffer must be finished (for example
// cudaStreamSynchronize) before the call; the call returns once the
// result is in the receive buffer.
type DevicePtr uintptr

// deviceArgs builds the arguments of a device call: send and recv hold
// nsend and nrecv elements of T in device memory.
func deviceArgs[T Elem](c *Comm, call string, send, recv DevicePtr, nsend, nrecv int, op *Op, opts []Option) (coll.Args, error) {
	var z T
	size := int(unsafe.Sizeof(z))
	a, err := args[T](call, nil, nil, op, opts)
	if err != nil {
		return a, err
	}
	for _, b := range []struct {
		name string
		p    DevicePtr
		n    int
		out  **gpu.Buffer
	}{{"send", send, nsend, &a.SendDevice}, {"recv", recv, nrecv, &a.RecvDevice}} {
		if b.n < 0 {
			return a, mpierr.New(call, mpierr.Count, "negative count for %s", b.name)
		}
		if b.n == 0 || (b.name == "send" && b.p == 0 && a.InPlace) {
			continue
		}
		if b.p == 0 {
			return a, mpierr.New(call, mpierr.Buffer, "%s is a null device pointer", b.name)
		}
		m := c.c.Memory(uintptr(b.p))
		if !m.OnDevice() {
			return a, mpierr.New(call, mpierr.Buffer,
				"%s (%#x) is not CUDA device memory as gocoll sees it (GOCOLL_CUDA=off, no CUDA driver, or no CUDA context in this process)", b.name, uintptr(b.p))
		}
		*b.out = &gpu.Buffer{Ptr: uintptr(b.p), Len: b.n * size, Mem: m}
	}
	return a, nil
}

// AllreduceDevice is Allreduce on count elements of type T in device
// memory: send and recv must not overlap.
//
//	err := mpi.AllreduceDevice[float32](c, dx, dsum, n, mpi.Sum)
func AllreduceDevice[T Elem](c *Comm, send, recv DevicePtr, count int, op Op, opts ...Option) error {
	a, err := deviceArgs[T](c, "MPI_Allreduce", send, recv, count, count, &op, opts)
	if err != nil {
		return err
	}
	a.Count = count
	return c.c.Allreduce(a)
}

// AllreduceDeviceInPlace is AllreduceDevice with buf as both input and
// output (MPI_IN_PLACE).
func AllreduceDeviceInPlace[T Elem](c *Comm, buf DevicePtr, count int, op Op, opts ...Option) error {
	a, err := deviceArgs[T](c, "MPI_Allreduce", 0, buf, 0, count, &op, opts)
	if err != nil {
		return err
	}
	a.InPlace, a.Count = true, count
	return c.c.Allreduce(a)
}

// ReduceScatterBlockDevice is ReduceScatterBlock in device memory: send
// holds Size()*recvcount elements, recv receives recvcount.
func ReduceScatterBlockDevice[T Elem](c *Comm, send, recv DevicePtr, recvcount int, op Op, opts ...Option) error {
	a, err := deviceArgs[T](c, "MPI_Reduce_scatter_block", send, recv, recvcount*c.Size(), recvcount, &op, opts)
	if err != nil {
		return err
	}
	a.Count = recvcount
	return c.c.ReduceScatterBlock(a)
}

// ReduceScatterDevice is ReduceScatter in device memory: send holds
// sum(recvcounts) elements, recv receives recvcounts[Rank()].
func ReduceScatterDevice[T Elem](c *Comm, send, recv DevicePtr, recvcounts []int, op Op, opts ...Option) error {
	total := 0
	for _, n := range recvcounts {
		total += max(n, 0)
	}
	mine := 0
	if c.Rank() < len(recvcounts) {
		mine = recvcounts[c.Rank()]
	}
	a, err := deviceArgs[T](c, "MPI_Reduce_scatter", send, recv, total, mine, &op, opts)
	if err != nil {
		return err
	}
	a.Counts = recvcounts
	return c.c.ReduceScatter(a)
}

// AllgatherDevice is Allgather in device memory: send holds count
// elements, recv receives count*Size().
func AllgatherDevice[T Elem](c *Comm, send, recv DevicePtr, count int, opts ...Option) error {
	a, err := deviceArgs[T](c, "MPI_Allgather", send, recv, count, count*c.Size(), nil, opts)
	if err != nil {
		return err
	}
	a.Count = count
	return c.c.Allgather(a)
}
