package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one soak run of the matrix.
type result struct {
	config              string
	p                   int
	calls, bytes, fails int64
	elapsed             time.Duration
	ok                  bool
	note                string
}

var summary = regexp.MustCompile(`soak: p=(\d+) iterations=(\d+) calls=(\d+) bytes=(\d+) failures=(\d+) elapsed=(\S+)`)

// runMatrix runs the soak for every number of ranks and configuration and
// prints the table; it returns the exit status.
func runMatrix(iters int, seed uint64, ranksSpec, configsSpec string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-soak:", err)
		return 1
	}
	gocollrun := filepath.Join(filepath.Dir(self), "gocollrun")
	if _, err := os.Stat(gocollrun); err != nil {
		if gocollrun, err = exec.LookPath("gocollrun"); err != nil {
			fmt.Fprintln(os.Stderr, "gocoll-soak: gocollrun is neither next to gocoll-soak nor on PATH (make build)")
			return 1
		}
	}
	ranks, err := parseRanks(ranksSpec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-soak:", err)
		return 1
	}
	var results []result
	status := 0
	for _, config := range strings.Split(configsSpec, ",") {
		if !slices.Contains([]string{"shm", "tcp", "netns", "netns-faults"}, config) {
			fmt.Fprintf(os.Stderr, "gocoll-soak: %q: no such configuration (shm, tcp, netns, netns-faults)\n", config)
			results = append(results, result{config: config, note: "not run: no such configuration"})
			status = 1
			continue
		}
		var hosts *emulated
		if strings.HasPrefix(config, "netns") {
			if hosts, err = newEmulated(self, config == "netns-faults"); err != nil {
				fmt.Fprintf(os.Stderr, "gocoll-soak: %s: %v\n", config, err)
				results = append(results, result{config: config, note: "not run: " + err.Error()})
				status = 1
				continue
			}
			fmt.Printf("gocoll-soak: %s: %s\n", config, hosts.describe())
		}
		for _, p := range ranks {
			r := runOne(gocollrun, self, config, hosts, p, iters, seed+uint64(p))
			results = append(results, r)
			fmt.Printf("gocoll-soak: %-13s p=%d: %s\n", config, p, r.line())
			if !r.ok {
				status = 1
			}
		}
		if hosts != nil {
			hosts.close()
		}
	}
	printTable(results, iters)
	return status
}

func parseRanks(s string) ([]int, error) {
	var out []int
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 1 || b < a {
			return nil, fmt.Errorf("-ranks %q: want 2-8 or 2,4,8", s)
		}
		for p := a; p <= b; p++ {
			out = append(out, p)
		}
		return out, nil
	}
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 {
			return nil, fmt.Errorf("-ranks %q: want 2-8 or 2,4,8", s)
		}
		out = append(out, p)
	}
	return out, nil
}

func runOne(gocollrun, self, config string, hosts *emulated, p, iters int, seed uint64) result {
	r := result{config: config, p: p}
	soakArgs := []string{self, "-iters", strconv.Itoa(iters), "-seed", strconv.FormatUint(seed, 10)}
	env := append(os.Environ(), "GOCOLL_FALLBACK=silent", "GOCOLL_TIMEOUT=120s")
	var argv []string
	switch config {
	case "shm":
		argv = append([]string{gocollrun, "-n", strconv.Itoa(p), "--timeout", "30m"}, soakArgs...)
	case "tcp":
		env = append(env, "GOCOLL_TRANSPORT=tcp")
		argv = append(append([]string{gocollrun, "-n", strconv.Itoa(p), "--timeout", "30m"}, soakArgs...), "-transport-algorithms")
	default: // two emulated hosts: gocollrun in the first, ranks split between both
		a := (p + 1) / 2
		spec := fmt.Sprintf("%s:%d", hosts.ns[0], a)
		if p-a > 0 {
			spec += fmt.Sprintf(",%s:%d", hosts.ns[1], p-a)
		}
		argv = append([]string{"ip", "netns", "exec", hosts.ns[0], gocollrun, "-n", strconv.Itoa(p), "--timeout", "30m",
			"--host", spec, "--launcher", "ip netns exec %h", "--bind", hosts.addr[0]}, soakArgs...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	r.elapsed = time.Since(start)
	m := summary.FindStringSubmatch(out.String())
	if m != nil {
		r.calls, _ = strconv.ParseInt(m[3], 10, 64)
		r.bytes, _ = strconv.ParseInt(m[4], 10, 64)
		r.fails, _ = strconv.ParseInt(m[5], 10, 64)
		if d, err := time.ParseDuration(m[6]); err == nil {
			r.elapsed = d
		}
	}
	r.ok = err == nil && m != nil && r.fails == 0
	if !r.ok {
		tail := out.String()
		if len(tail) > 3000 {
			tail = "..." + tail[len(tail)-3000:]
		}
		r.note = fmt.Sprintf("exit %v", err)
		fmt.Fprintf(os.Stderr, "gocoll-soak: %s p=%d failed (%v):\n%s\n", config, p, err, tail)
	}
	return r
}

func (r result) line() string {
	if r.calls == 0 && !r.ok {
		return "FAILED " + r.note
	}
	s := fmt.Sprintf("%d calls, %.1f MiB, %d failures, %v", r.calls, float64(r.bytes)/(1<<20), r.fails, r.elapsed.Round(time.Millisecond))
	if !r.ok {
		s += " FAILED " + r.note
	}
	return s
}

// printTable prints every run, and each configuration's time against the
// one it adds to: tcp against shm, netns-faults against netns.
func printTable(results []result, iters int) {
	base := map[string]string{"tcp": "shm", "netns-faults": "netns"}
	time0 := map[string]time.Duration{}
	for _, r := range results {
		time0[fmt.Sprintf("%s/%d", r.config, r.p)] = r.elapsed
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "config\tranks\titerations\tcalls\tMiB\tfailures\ttime\tper iteration\tvs\t\n")
	var total time.Duration
	var calls, fails int64
	for _, r := range results {
		if r.p == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t%s\t\n", r.config, r.note)
			continue
		}
		vs := ""
		if b, ok := base[r.config]; ok {
			if t0 := time0[fmt.Sprintf("%s/%d", b, r.p)]; t0 > 0 {
				vs = fmt.Sprintf("%.2fx %s", float64(r.elapsed)/float64(t0), b)
			}
		}
		if !r.ok {
			vs += " FAILED"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%d\t%v\t%v\t%s\t\n", r.config, r.p, iters, r.calls, float64(r.bytes)/(1<<20),
			r.fails, r.elapsed.Round(time.Millisecond), (r.elapsed / time.Duration(max(iters, 1))).Round(time.Microsecond), vs)
		total += r.elapsed
		calls += r.calls
		fails += r.fails
	}
	tw.Flush()
	fmt.Printf("total: %d runs, %d calls, %d failures, %v\n", len(results), calls, fails, total.Round(time.Second))
}

// emulated is two network namespaces joined by a veth pair, with
// loopback-range addresses (traffic never leaves them), and optionally
// faults on the link.
type emulated struct {
	ns, veth, addr [2]string
	faults         string // how the faults are made, for the report
	queues         []*exec.Cmd
}

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func newEmulated(self string, faults bool) (*emulated, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("needs root to create network namespaces")
	}
	id := 20 + rand.IntN(200)
	e := &emulated{}
	for i, side := range []string{"a", "b"} {
		e.ns[i] = fmt.Sprintf("gocoll-soak%d-%s", id, side)
		e.veth[i] = fmt.Sprintf("gcs%d%s", id, side)
		e.addr[i] = fmt.Sprintf("127.1.%d.%d", id, i+1)
	}
	steps := [][]string{
		{"ip", "netns", "add", e.ns[0]}, {"ip", "netns", "add", e.ns[1]},
		{"ip", "link", "add", e.veth[0], "type", "veth", "peer", "name", e.veth[1]},
		{"ip", "link", "set", e.veth[0], "netns", e.ns[0]}, {"ip", "link", "set", e.veth[1], "netns", e.ns[1]},
	}
	for i := range 2 {
		in := []string{"ip", "netns", "exec", e.ns[i]}
		steps = append(steps,
			append(in, "ip", "link", "set", "lo", "up"),
			append(in, "ip", "addr", "add", e.addr[i]+"/24", "dev", e.veth[i]),
			append(in, "ip", "link", "set", e.veth[i], "up"),
			// route_localnet lets 127/8 addresses travel the veth.
			append(in, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1", "net.ipv4.conf."+e.veth[i]+".route_localnet=1"))
	}
	for _, s := range steps {
		if err := sh(s...); err != nil {
			e.close()
			return nil, err
		}
	}
	if faults {
		if err := e.addFaults(self); err != nil {
			e.close()
			return nil, err
		}
	}
	return e, nil
}

// addFaults delays (1 ms +- 0.5 ms), drops (1%) and reorders (5%) the
// packets both ways: with tc netem if the kernel has it, else with
// iptables (loss) and the NFQUEUE in serveQueue (delay, reordering).
func (e *emulated) addFaults(self string) error {
	netem := true
	for i := range 2 {
		if err := sh("ip", "netns", "exec", e.ns[i], "tc", "qdisc", "add", "dev", e.veth[i], "root",
			"netem", "delay", "1ms", "0.5ms", "loss", "1%", "reorder", "5%"); err != nil {
			netem = false
			break
		}
	}
	if netem {
		e.faults = "tc netem delay 1ms 0.5ms loss 1% reorder 5%"
		return nil
	}
	ipt, err := exec.LookPath("iptables-legacy")
	if err != nil {
		if ipt, err = exec.LookPath("iptables"); err != nil {
			return fmt.Errorf("the kernel has no netem qdisc, and iptables is missing for the user-space stand-in (apt-get install iptables)")
		}
	}
	for i := range 2 {
		in := []string{"ip", "netns", "exec", e.ns[i]}
		if err := sh(append(in, ipt, "-A", "OUTPUT", "-o", e.veth[i], "-m", "statistic", "--mode", "random", "--probability", "0.01", "-j", "DROP")...); err != nil {
			return err
		}
		if err := sh(append(in, ipt, "-A", "OUTPUT", "-o", e.veth[i], "-p", "tcp", "-j", "NFQUEUE", "--queue-num", "7", "--queue-bypass")...); err != nil {
			return err
		}
		q := exec.Command("ip", "netns", "exec", e.ns[i], self, "-netem-queue", "7", "-delay", "1ms", "-jitter", "500us", "-reorder", "5")
		q.Stderr = os.Stderr
		if err := q.Start(); err != nil {
			return err
		}
		e.queues = append(e.queues, q)
	}
	time.Sleep(200 * time.Millisecond) // let the queues bind
	e.faults = "no netem in this kernel: " + filepath.Base(ipt) + " statistic drop 1%, NFQUEUE delay 1ms +-0.5ms, 5% reordered"
	return nil
}

func (e *emulated) describe() string {
	s := fmt.Sprintf("hosts %s (%s) and %s (%s)", e.ns[0], e.addr[0], e.ns[1], e.addr[1])
	if e.faults != "" {
		s += "; faults: " + e.faults
	}
	return s
}

func (e *emulated) close() {
	for _, q := range e.queues {
		q.Process.Kill()
		q.Wait()
	}
	for _, ns := range e.ns {
		if ns != "" {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	}
}
