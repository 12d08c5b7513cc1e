package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// The CUDA support queries (tests/c/cudaquery.c): Open MPI's
// MPIX_Query_cuda_support with mpi-ext.h's macros, MPICH's
// MPIX_GPU_query_support and MPIX_Query_{cuda,ze,hip}_support, before
// and after MPI_Init. They answer 1 on the stand-in CUDA driver
// (tests/gpu/c/stubcuda.c, found through LD_LIBRARY_PATH as a real one
// would be) and 0 with GOCOLL_CUDA=off, with or without a driver; a
// binary built with MPICH's mpicc gets the same answers from gocoll.
func TestCUDAQuery(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/cudaquery.c", "cudaquery")
	stub := t.TempDir()
	if b, err := exec.Command("cc", "-O2", "-shared", "-fPIC", "-o", filepath.Join(stub, "libcuda.so.1"),
		filepath.Join(harness.Root, "tests", "gpu", "c", "stubcuda.c"), "-lm").CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in driver: %v\n%s", err, b)
	}
	withStub := "LD_LIBRARY_PATH=" + stub
	cases := []struct {
		env  []string
		want string
	}{
		{[]string{withStub, "GOCOLL_CUDA=on"}, "1"},
		{[]string{withStub}, "1"}, // auto: the driver is there
		{[]string{withStub, "GOCOLL_CUDA=off"}, "0"},
		{[]string{"GOCOLL_CUDA=off"}, "0"},
	}
	if !hasDriver() {
		cases = append(cases, struct {
			env  []string
			want string
		}{nil, "0"}) // auto, no driver
	}
	for _, c := range cases {
		for _, n := range []int{1, 2} {
			what := fmt.Sprintf("cudaquery %s on %d ranks, %v", c.want, n, c.env)
			out, code := run(t, time.Minute, c.env, gocollrun(n, bin, c.want)...)
			harness.ExpectRanks(t, what, out, code, n)
		}
		// Started without a launcher: one rank.
		out, code := run(t, time.Minute, c.env, bin, c.want)
		harness.ExpectRanks(t, fmt.Sprintf("cudaquery %s, no launcher, %v", c.want, c.env), out, code, 1)
	}

	if _, err := exec.LookPath("mpicc.mpich"); err != nil {
		t.Fatal("mpicc.mpich is missing: `make deps` installs it")
	}
	mb := compile(t, "mpicc.mpich", "tests/c/cudaquery.c", "cudaquery-mpich")
	abi := filepath.Join(harness.Root, "build", "lib", "mpich-abi")
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"LD_LIBRARY_PATH=" + abi + ":" + stub, "GOCOLL_CUDA=on"}, "1"},
		{[]string{"LD_LIBRARY_PATH=" + abi + ":" + stub, "GOCOLL_CUDA=off"}, "0"},
	} {
		out, code := run(t, time.Minute, c.env, gocollrun(2, mb, c.want)...)
		harness.ExpectRanks(t, fmt.Sprintf("MPICH-built cudaquery %s, %v", c.want, c.env), out, code, 2)
	}
}

// hasDriver reports whether this machine has a CUDA driver where the
// loader finds one.
func hasDriver() bool {
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/lib/libcuda.so.1"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	for _, d := range strings.Split(os.Getenv("LD_LIBRARY_PATH"), ":") {
		if _, err := os.Stat(filepath.Join(d, "libcuda.so.1")); d != "" && err == nil {
			return true
		}
	}
	return false
}
