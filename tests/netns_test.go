package tests

import (
	"github.com/gocoll/gocoll/tests/internal/harness"

	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// emulatedHosts creates two network namespaces joined by a veth pair with
// loopback-range addresses (127.1.x.1 and 127.1.x.2; traffic never leaves
// these namespaces) and removes them when the test ends.
func emulatedHosts(t *testing.T) (a, b, addrA string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (ip netns)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("ip (iproute2) is missing: `make deps` installs it")
	}
	id := rand.IntN(200) + 20
	a, b = fmt.Sprintf("gocoll-t%d-a", id), fmt.Sprintf("gocoll-t%d-b", id)
	va, vb := fmt.Sprintf("gcl%da", id), fmt.Sprintf("gcl%db", id)
	addrA, addrB := fmt.Sprintf("127.1.%d.1", id), fmt.Sprintf("127.1.%d.2", id)
	sh := func(cmd string) {
		if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", a).Run()
		exec.Command("ip", "netns", "del", b).Run()
	})
	sh(fmt.Sprintf("ip netns add %s && ip netns add %s", a, b))
	sh(fmt.Sprintf("ip link add %s type veth peer name %s && ip link set %s netns %s && ip link set %s netns %s", va, vb, va, a, vb, b))
	for _, h := range []struct{ ns, dev, addr string }{{a, va, addrA}, {b, vb, addrB}} {
		// route_localnet lets 127/8 addresses travel the veth.
		sh(fmt.Sprintf("ip netns exec %s sh -c 'ip link set lo up && ip addr add %s/24 dev %s && ip link set %s up && sysctl -qw net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.%s.route_localnet=1'",
			h.ns, h.addr, h.dev, h.dev, h.dev))
	}
	return a, b, addrA
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
	for _, want := range []string{"gocoll: rank 0 on host " + a, "tcp " + addrA, "gocoll: rank 3 on host " + b, "shm:["} {
		if !strings.Contains(out, want) {
			t.Errorf("transport report lacks %q", want)
		}
	}
}
