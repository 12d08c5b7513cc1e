package tests

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

var checksumLine = regexp.MustCompile(`(?m)^rank (\d+): checksum ([0-9a-f]+)$`)

// checksums returns each rank's checksum line of tests/c/reproducible.c.
func checksums(t *testing.T, what, out string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	for _, m := range checksumLine.FindAllStringSubmatch(out, -1) {
		sums[m[1]] = m[2]
	}
	if len(sums) == 0 {
		t.Errorf("%s: no checksum lines:\n%s", what, out)
	}
	return sums
}

// sameSums checks that every run of a rank count gave each rank the same
// results (runs maps a run's description to its checksums).
func sameSums(t *testing.T, np int, runs map[string]map[string]string) {
	t.Helper()
	names := slices.Sorted(maps.Keys(runs))
	for _, name := range names[1:] {
		if !maps.Equal(runs[name], runs[names[0]]) {
			t.Errorf("np=%d: %s gave other bits than %s: %v against %v", np, name, names[0], runs[name], runs[names[0]])
		}
	}
}

// GOCOLL_REPRODUCIBLE=1 in real processes of the C ABI, np = 2..5: auto,
// every algorithm forced in turn (those that cannot compute the canonical
// order fall back), and the TCP transport instead of shared memory; each
// rank checks its results bit for bit against the canonical association
// it computes itself (tests/c/reproducible.c), and every run of one rank
// count gives each rank the same bits. Without the mode, ring at np=3
// does not: the check can fail.
func TestReproducibleProcesses(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/reproducible.c", "reproducible")
	for np := 2; np <= 5; np++ {
		runs := map[string]map[string]string{}
		envs := map[string][]string{"auto": nil, "tcp": {"GOCOLL_TRANSPORT=tcp"}}
		for _, env := range forcedRounds() {
			envs[strings.Join(env[:4], " ")] = env
		}
		for name, env := range envs {
			what := fmt.Sprintf("np=%d %s", np, name)
			out, code := run(t, 2*time.Minute, append([]string{"GOCOLL_REPRODUCIBLE=1"}, env...), gocollrun(np, bin)...)
			harness.ExpectRanks(t, what, out, code, np)
			runs[name] = checksums(t, what, out)
		}
		sameSums(t, np, runs)
	}
	out, code := run(t, 2*time.Minute, []string{"GOCOLL_ALLREDUCE_ALGORITHM=ring"}, gocollrun(3, bin)...)
	if code == 0 || !strings.Contains(out, "not canonical") {
		t.Errorf("ring at np=3 without GOCOLL_REPRODUCIBLE passed the canonical check (exit %d):\n%s", code, out)
	}
}

// The same on two emulated hosts of two ranks (shared memory inside a
// host, TCP between), auto and hierarchical: the bits of one host's four
// ranks.
func TestReproducibleOnTwoHosts(t *testing.T) {
	a, b, addrA := emulatedHosts(t)
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/reproducible.c", "reproducible")
	runs := map[string]map[string]string{}
	out, code := run(t, 2*time.Minute, []string{"GOCOLL_REPRODUCIBLE=1"}, gocollrun(4, bin)...)
	harness.ExpectRanks(t, "one host", out, code, 4)
	runs["one host"] = checksums(t, "one host", out)
	for _, alg := range []string{"auto", "hierarchical"} {
		env := []string{"GOCOLL_REPRODUCIBLE=1", "GOCOLL_FALLBACK=error"}
		for _, c := range []string{"ALLREDUCE", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK"} {
			env = append(env, "GOCOLL_"+c+"_ALGORITHM="+alg)
		}
		argv := []string{"ip", "netns", "exec", a, harness.Bin + "/gocollrun", "-n", "4",
			"--host", a + ":2," + b + ":2", "--launcher", "ip netns exec %h", "--bind", addrA, bin}
		what := "two hosts, " + alg
		out, code := run(t, 2*time.Minute, env, argv...)
		harness.ExpectRanks(t, what, out, code, 4)
		runs[what] = checksums(t, what, out)
	}
	sameSums(t, 4, runs)
}
