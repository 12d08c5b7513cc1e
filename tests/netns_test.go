package tests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/internal/netns"
	"github.com/gocoll/gocoll/tests/internal/harness"
)

// emulatedHosts makes two emulated hosts (internal/netns: network
// namespaces on a bridge, loopback-range addresses, so that traffic never
// leaves this machine) and removes them when the test ends. Where they
// cannot be made the test fails, as transport/tcp's emulated-host tests
// do: a test that cannot make its environment has proved nothing.
// GOCOLL_TEST_NO_NETNS=1 skips it instead, by the user's choice, and says
// so.
func emulatedHosts(t *testing.T) (a, b, addrA string) {
	t.Helper()
	c, err := netns.New(2, "")
	if errors.Is(err, netns.ErrNoNamespaces) {
		noHosts(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.Hosts[0], c.Hosts[1], c.Addrs[0]
}

// noHosts ends a test that needs two emulated hosts where they cannot be
// made: a failure, unless GOCOLL_TEST_NO_NETNS=1 asks to skip it.
func noHosts(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("GOCOLL_TEST_NO_NETNS") == "1" {
		t.Skipf("SKIPPED, not passed (GOCOLL_TEST_NO_NETNS=1): two emulated hosts: %s", why)
	}
	t.Fatalf("two emulated hosts: %s; run the tests as root with iproute2, or set GOCOLL_TEST_NO_NETNS=1 to skip the emulated-host tests knowingly", why)
}

// The whole subset on two emulated hosts, two ranks each: shared memory
// inside a host, the tcp transport between them, gocollrun starting the
// ranks with `ip netns exec`.
func TestTwoHostsOverTCP(t *testing.T) {
	a, b, addrA := emulatedHosts(t)
	bin := compile(t, harness.Bin+"/mpicc", "tests/c/subset.c", "subset")
	argv := []string{"ip", "netns", "exec", a, harness.Bin + "/gocollrun", "-n", "4",
		"--host", a + ":2," + b + ":2", "--launcher", "ip netns exec %h", "--bind", addrA, bin}
	out, code := run(t, 2*time.Minute, []string{"GOCOLL_DEBUG=info"}, argv...)
	harness.ExpectRanks(t, "subset on two emulated hosts", out, code, 4)
	t.Log(regexp.MustCompile(`(?m)^gocoll: rank \d+ on host .*$`).FindAllString(out, -1))
	for _, want := range []string{"gocoll: rank 0 on host " + a, "tcp on " + addrA, "gocoll: rank 3 on host " + b, "shm to [2], tcp to [0 1]"} {
		if !strings.Contains(out, want) {
			t.Errorf("transport report lacks %q", want)
		}
	}
}

// gocoll-compare's cluster mode, as docs/performance.md runs it but small: two
// emulated hosts of two ranks on rate-limited links (internal/netns),
// every algorithm that runs across hosts forced in turn, auto, and
// auto-tuned (auto with the fitted machine as its tuning file), each
// run's results verified by collbench (a wrong result fails the run,
// and with it the command); the table has a time for every one at every
// size and both autos over the best, the model's table what both autos
// chose and a price and measured/model for every one, the end a score
// of both autos per collective, and the namespaces are gone afterwards.
func TestCompareOnEmulatedCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		noHosts(t, "creating network namespaces (ip netns add) needs root")
	}
	colls := []algorithms.Collective{algorithms.Allreduce, algorithms.Allgather}
	out, code := run(t, 5*time.Minute, nil, harness.Bin+"/gocoll-compare", "-cluster", "2x2", "-rate", "100mbit",
		"-c", "allreduce,allgather", "-m", "8:4096", "-reps", "1", "-iters", "20", "-iters-large", "5")
	if code != 0 {
		t.Fatalf("gocoll-compare -cluster 2x2: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "2 emulated hosts") || !strings.Contains(out, "100mbit each way") {
		t.Errorf("no description of the cluster:\n%s", out)
	}
	// The machine fitted on the same ranks first, both levels.
	for _, want := range []string{"machine fitted on 4 ranks, 2 nodes x 2, in ", "between nodes (rank 0 <-> rank 2): alpha", "within a node (rank 0 <-> rank 1): node_alpha"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q:\n%s", want, out)
		}
	}
	// The sizes end at 4 KiB: the model's error line has nothing from 64 KiB.
	if !strings.Contains(out, "model error at >= 65536 bytes: no sizes measured there") {
		t.Errorf("no model error line:\n%s", out)
	}
	for _, c := range colls {
		var names []string
		for _, a := range algorithms.All(c) {
			if a.IsSchedule() {
				names = append(names, a.Name)
			}
		}
		// The header (auto, auto-tuned, the algorithms sorted, best,
		// auto/best, auto-tuned/best) and a line per size with a number
		// in every column.
		head := regexp.MustCompile(`(?m)^\s*bytes\s+auto\s+auto-tuned\s+` + strings.Join(names, `\s+`) + `\s+best\s+auto/best\s+auto-tuned/best`)
		if !head.MatchString(out) {
			t.Errorf("%v: no table header with auto, auto-tuned and %v:\n%s", c, names, out)
		}
		for _, b := range []int{8, 64, 4096} {
			line := regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%d(\s+\d+\.\d\d){%d}\s+[a-z_]+(\s+\d+\.\d\d){2}`, b, len(names)+2))
			if !line.MatchString(out) {
				t.Errorf("%v: no line of times at %d bytes:\n%s", c, b, out)
			}
			// The model's table: what auto and auto-tuned chose, then
			// the model's time and measured/model of every configuration.
			model := regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%d\s+[a-z_]+\s+[a-z_]+(\s+\d+\.\d\d){%d}\s*$`, b, 2*(len(names)+2)))
			if !model.MatchString(out) {
				t.Errorf("%v: no line of the model at %d bytes:\n%s", c, b, out)
			}
		}
		// The end: both autos scored over the collective's 10 sizes.
		score := regexp.MustCompile(fmt.Sprintf(`(?m)^  %s: auto \d+ of 10 sizes within 1\.10 \(worst \d+\.\d\d at \d+ B\): (not )?met; auto-tuned \d+ of 10 sizes within 1\.10 \(worst \d+\.\d\d at \d+ B\): (not )?met$`, c))
		if !score.MatchString(out) {
			t.Errorf("%v: no score of auto and auto-tuned:\n%s", c, out)
		}
	}
	// Only this run's namespaces (named in the description): another
	// emulated cluster may be running beside the test.
	id := regexp.MustCompile(`network namespaces (gocoll-c\d+-)h0\.\.`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("the description does not name the namespaces:\n%s", out)
	}
	if list, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(list), id[1]) {
		t.Errorf("emulated hosts %s* left behind:\n%s", id[1], list)
	}
}
