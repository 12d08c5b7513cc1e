package mpi_test

import (
	"strings"
	"testing"

	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/ops"
)

// GOCOLL_OPS_ISA reaches the kernels through the Go API, as package ops
// reads no environment: RunLocal caps them at the level it names, and an
// invalid value is RunLocal's error, naming the variable.
func TestOpsISAVariable(t *testing.T) {
	t.Cleanup(func() { ops.CapISA("") })
	t.Setenv("GOCOLL_OPS_ISA", "go")
	err := mpi.RunLocal(2, func(c *mpi.Comm) error {
		got := make([]float32, 3)
		return mpi.Allreduce(c, []float32{1, 2, 3}, got, mpi.Sum)
	})
	if err != nil {
		t.Fatal(err)
	}
	if ops.ISA() != "go" {
		t.Errorf("GOCOLL_OPS_ISA=go: the kernels are %q", ops.ISA())
	}
	t.Setenv("GOCOLL_OPS_ISA", "sse9")
	err = mpi.RunLocal(1, func(*mpi.Comm) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "GOCOLL_OPS_ISA=sse9") {
		t.Errorf("GOCOLL_OPS_ISA=sse9: RunLocal returned %v", err)
	}
}
