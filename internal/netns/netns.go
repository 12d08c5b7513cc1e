// Package netns emulates a cluster on one Linux machine: each host is a
// network namespace with one link to a switch (a bridge in a namespace
// of its own), its address in the loopback range (127.3.<id>.<host+1>),
// so that no packet can leave the machine. A link can be rate-limited
// (tc tbf, both directions: the host's egress and the switch's egress
// towards it), as a NIC is. Making one needs root and iproute2; Close
// removes every namespace, which removes the links with them.
package netns

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
)

// ErrNoNamespaces wraps New's error when the machine lets no network
// namespace be made (not root, no iproute2, or a sandbox that refuses
// `ip netns add`), as distinct from a failure while building the links.
var ErrNoNamespaces = errors.New("cannot create network namespaces")

// Cluster is an emulated cluster.
type Cluster struct {
	ID    int      // the third byte of the addresses; part of every name
	Hosts []string // the hosts' namespaces, in order
	Addrs []string // their addresses
	Rate  string   // tc's rate of every link ("" unlimited)
	sw    string   // the switch's namespace
}

// New makes a cluster of n hosts whose links carry rate (a tc rate such
// as "1gbit"; "" for no limit).
func New(n int, rate string) (*Cluster, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: emulating hosts (ip netns add) needs root", ErrNoNamespaces)
	}
	tools := []string{"ip"}
	if rate != "" {
		tools = append(tools, "tc")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: emulating hosts needs %s (apt-get install iproute2)", ErrNoNamespaces, tool)
		}
	}
	if n < 1 || n > 250 {
		return nil, fmt.Errorf("emulating %d hosts: want 1 to 250", n)
	}
	id := 20 + rand.IntN(230)
	c := &Cluster{ID: id, Rate: rate, sw: fmt.Sprintf("gocoll-c%d-sw", id)}
	if out, err := exec.Command("ip", "netns", "add", c.sw).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: %v: %s", ErrNoNamespaces, err, strings.TrimSpace(string(out)))
	}
	steps := [][]string{
		{"ip", "netns", "exec", c.sw, "ip", "link", "add", "br0", "type", "bridge"},
		{"ip", "netns", "exec", c.sw, "ip", "link", "set", "br0", "up"},
	}
	for i := range n {
		host, addr := fmt.Sprintf("gocoll-c%d-h%d", id, i), fmt.Sprintf("127.3.%d.%d", id, i+1)
		c.Hosts, c.Addrs = append(c.Hosts, host), append(c.Addrs, addr)
		// The veth's ends: hN in the host, sN in the switch.
		h, s := fmt.Sprintf("gc%dh%d", id, i), fmt.Sprintf("gc%ds%d", id, i)
		in, sw := []string{"ip", "netns", "exec", host}, []string{"ip", "netns", "exec", c.sw}
		steps = append(steps,
			[]string{"ip", "netns", "add", host},
			[]string{"ip", "link", "add", h, "type", "veth", "peer", "name", s},
			[]string{"ip", "link", "set", h, "netns", host},
			[]string{"ip", "link", "set", s, "netns", c.sw},
			append(sw, "ip", "link", "set", s, "master", "br0", "up"),
			append(in, "ip", "link", "set", "lo", "up"),
			append(in, "ip", "addr", "add", addr+"/24", "dev", h),
			append(in, "ip", "link", "set", h, "up"),
			// route_localnet lets 127/8 addresses travel the link.
			append(in, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1", "net.ipv4.conf."+h+".route_localnet=1"))
		if rate != "" {
			// A token bucket each way; its burst must hold a timer
			// tick's worth of the rate (1 Gbit/s at 250 Hz: 500 KB).
			tbf := []string{"root", "tbf", "rate", rate, "burst", "1mb", "latency", "100ms"}
			steps = append(steps,
				append(append(in, "tc", "qdisc", "add", "dev", h), tbf...),
				append(append(sw, "tc", "qdisc", "add", "dev", s), tbf...))
		}
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			c.Close()
			return nil, fmt.Errorf("emulating %d hosts: %s: %v: %s", n, strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return c, nil
}

// Exec returns argv run in host i's namespace.
func (c *Cluster) Exec(i int, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", c.Hosts[i]}, argv...)
}

// String describes the cluster.
func (c *Cluster) String() string {
	rate := "unlimited"
	if c.Rate != "" {
		rate = c.Rate + " each way (tc tbf)"
	}
	return fmt.Sprintf("%d emulated hosts (network namespaces %s..%s on a bridge, 127.3.%d.x), links %s",
		len(c.Hosts), c.Hosts[0], c.Hosts[len(c.Hosts)-1], c.ID, rate)
}

// Close removes the cluster's namespaces (and with them its links).
func (c *Cluster) Close() {
	for _, ns := range append([]string{c.sw}, c.Hosts...) {
		exec.Command("ip", "netns", "del", ns).Run()
	}
}
