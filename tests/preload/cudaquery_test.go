package preload

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// Under the preload the host MPI's CUDA support answers stand: its
// point-to-point calls are its own, and they take device memory only if
// it is CUDA-aware. The library defines none of the queries gocoll's own
// library has (MPIX_Query_cuda_support, MPIX_GPU_query_support, ...;
// nm -D), and a program built with each host MPI gets the same answers
// with the preload and without.
func TestHostAnswersCUDAQuery(t *testing.T) {
	need(t, "nm")
	out, err := exec.Command("nm", "-D", "--defined-only", preloadLib()).CombinedOutput()
	if err != nil {
		t.Fatalf("nm -D: %v\n%s", err, out)
	}
	for _, name := range []string{"GPU_query_support", "Query_cuda_support", "Query_ze_support", "Query_hip_support"} {
		for _, prefix := range []string{"MPIX_", "PMPIX_"} {
			if regexp.MustCompile(`(?m) ` + prefix + name + `$`).Match(out) {
				t.Errorf("the preload library defines %s%s: the host MPI's must answer", prefix, name)
			}
		}
	}
	answer := regexp.MustCompile(`(?m)^cuda support: query (-?\d+), gpu_query (-?\d+)$`)
	for _, m := range hostMPIs {
		need(t, m.cc, m.run)
		prog := compile(t, m.cc, "cudaquery-"+m.name, "cudaquery.c")
		var got []string
		for _, env := range [][]string{{"LD_PRELOAD="}, {"GOCOLL_CUDA=on"}, nil} {
			out, code, errs := runRanks(t, "cudaquery "+m.name, m, 2, env, prog)
			a := answer.FindString(out)
			if code != 0 || a == "" || strings.Contains(a, "-1, gpu_query -1") {
				t.Fatalf("%s %v: exit %d, no answer:\n%s\n%s", m.name, env, code, out, strings.Join(errs, ""))
			}
			got = append(got, a)
		}
		if got[1] != got[0] || got[2] != got[0] {
			t.Errorf("%s: without the preload %q; with it %q (GOCOLL_CUDA=on) and %q", m.name, got[0], got[1], got[2])
		}
	}
}
