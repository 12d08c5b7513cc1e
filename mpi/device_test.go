package mpi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/mpi"
)

// The reduce-scatters and the in-place allreduce on device memory, and the
// error for a pointer that is not device memory.
func TestDeviceCollectives(t *testing.T) {
	err := mpi.RunLocal(3, func(c *mpi.Comm) error {
		r := c.Rank()
		send := cudaMalloc(6 * 8)
		cudaMemcpyHtoD(send, []float64{1, 2, 3, 4, 5, float64(r)})
		block := cudaMalloc(2 * 8)
		if err := mpi.ReduceScatterBlockDevice[float64](c, send, block, 2, mpi.Max); err != nil {
			return err
		}
		want := [][]float64{{1, 2}, {3, 4}, {5, 2}}[r]
		if got := cudaMemcpyDtoH[float64](block, 2); got[0] != want[0] || got[1] != want[1] {
			return errors.New("reduce_scatter_block: wrong result")
		}
		counts := []int{3, 0, 3}
		mine := cudaMalloc(3 * 8)
		if err := mpi.ReduceScatterDevice[float64](c, send, mine, counts, mpi.Sum); err != nil {
			return err
		}
		if r == 2 {
			if got := cudaMemcpyDtoH[float64](mine, 3); got[0] != 12 || got[1] != 15 || got[2] != 3 {
				return errors.New("reduce_scatter: wrong result")
			}
		}
		buf := cudaMalloc(4)
		cudaMemcpyHtoD(buf, []int32{int32(r + 1)})
		if err := mpi.AllreduceDeviceInPlace[int32](c, buf, 1, mpi.Prod); err != nil {
			return err
		}
		if got := cudaMemcpyDtoH[int32](buf, 1); got[0] != 6 {
			return errors.New("in-place allreduce: wrong result")
		}
		host := make([]int32, 1)
		err := mpi.AllreduceDevice[int32](c, mpi.DevicePtr(uintptrOf(host)), buf, 1, mpi.Sum)
		var me *mpi.Error
		if !errors.As(err, &me) || !strings.Contains(err.Error(), "not CUDA device memory") {
			return errors.New("a host pointer passed as device memory was accepted: " + errString(err))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
