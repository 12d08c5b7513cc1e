package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMPICHProgram runs a program linked with MPICH's own library, and so
// its own PMI-1 client, under gocollrun: on one host (PMI_FD) and over
// launched hosts (PMI_PORT with initack).
func TestMPICHProgram(t *testing.T) {
	t.Parallel()
	mpicc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		t.Skip("mpicc.mpich is not installed (apt-get install libmpich-dev)")
	}
	bin := filepath.Join(t.TempDir(), "mpich_hello")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, mpicc, "-o", bin, "testdata/mpich_hello.c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc.mpich: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"-n", "3", bin},
		{"-n", "4", "--host", "localhost:2,fakeA:2", "--launcher", "env GOCOLL_FAKEHOST=%h", "--bind", "127.0.0.1", bin},
	} {
		res := run(t, testEnv(), args...)
		n := 3
		if len(args) > 3 {
			n = 4
		}
		if res.code != 0 {
			t.Fatalf("gocollrun %v: exit %d\n%s%s", args, res.code, res.stdout, res.stderr)
		}
		for r := range n {
			if want := fmt.Sprintf("MPICH rank %d of %d sum %d\n", r, n, n*(n+1)/2); !strings.Contains(res.stdout, want) {
				t.Errorf("gocollrun %v: no %q in\n%s", args, want, res.stdout)
			}
		}
		if res.stderr != "" {
			t.Errorf("gocollrun %v: stderr:\n%s", args, res.stderr)
		}
	}
}
