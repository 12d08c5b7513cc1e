package reliability

import (
	"github.com/gocoll/gocoll/tests/internal/harness"

	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// socketInodes returns the inodes of pid's sockets.
func socketInodes(pid int) map[string]bool {
	inodes := map[string]bool{}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	return inodes
}

// tcpSocket is one line of /proc/net/tcp or tcp6.
type tcpSocket struct {
	local, remote string // ip:port
	listening     bool
}

// tcpSockets returns pid's TCP sockets.
func tcpSockets(t *testing.T, pid int) []tcpSocket {
	inodes := socketInodes(pid)
	var out []tcpSocket
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			out = append(out, tcpSocket{local: procAddr(t, fs[1]), remote: procAddr(t, fs[2]), listening: fs[3] == "0A"})
		}
	}
	return out
}

// procAddr decodes /proc/net/tcp's "0100007F:1F90" (and tcp6's form).
func procAddr(t *testing.T, s string) string {
	hexIP, hexPort, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexIP)
	port, err2 := strconv.ParseUint(hexPort, 16, 16)
	if err != nil || err2 != nil {
		t.Fatalf("cannot parse %q from /proc/net/tcp", s)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 { // each 32-bit word is in host order
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}

// unixPaths returns the filesystem paths of pid's Unix sockets.
func unixPaths(pid int) []string {
	inodes := socketInodes(pid)
	b, _ := os.ReadFile("/proc/net/unix")
	var paths []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		fs := strings.Fields(line)
		if len(fs) >= 8 && inodes[fs[6]] && !strings.HasPrefix(fs[7], "@") {
			paths = append(paths, fs[7])
		}
	}
	return paths
}

// runningJob starts victim's loop of allreduces on n ranks with env and
// returns the job and the ranks' pids once all are inside it.
func runningJob(t *testing.T, n int, env []string, launcher ...string) (*job, map[int]int) {
	bin := compile(t, "tests/reliability/c/victim.c", "victim")
	argv := append(append([]string{filepath.Join(harness.Bin, "gocollrun"), "-n", strconv.Itoa(n)}, launcher...),
		bin, "-coll", "allreduce", "-count", "50000", "-comm", "split")
	j := startJob(t, env, argv...)
	pids := map[int]int{}
	for _, m := range j.waitFor(ready, n, 30*time.Second) {
		r, _ := strconv.Atoi(m[1])
		pids[r], _ = strconv.Atoi(m[2])
	}
	return j, pids
}

// stop ends a running job with SIGTERM, as Ctrl-C would, and checks that
// no rank reported an error or a wrong result before.
func stop(t *testing.T, j *job) {
	t.Helper()
	out := j.output()
	if strings.Contains(out, "WRONG") || regexp.MustCompile(`(?m)^gocoll: `).MatchString(out) {
		t.Errorf("the job failed while it ran:\n%s", out)
	}
	syscall.Kill(j.cmd.Process.Pid, syscall.SIGTERM)
	j.wait(15 * time.Second)
}

// A job on one host listens on loopback only (GOCOLL_TRANSPORT=tcp), or
// not at all (the default: shared memory); its connections are loopback
// too; gocollrun itself opens no port; no rank binds a Unix socket to a
// path.
func TestOneHostListensOnLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    []string
		listen bool
	}{
		{"tcp", []string{"GOCOLL_TRANSPORT=tcp", "GOCOLL_ALLREDUCE_ALGORITHM=ring"}, true},
		{"default", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, pids := runningJob(t, 3, tc.env)
			for r, pid := range pids {
				socks := tcpSockets(t, pid)
				listening := 0
				for _, s := range socks {
					host, _, _ := net.SplitHostPort(s.local)
					if host != "127.0.0.1" {
						t.Errorf("rank %d has a socket on %s (remote %s), not on loopback", r, s.local, s.remote)
					}
					if s.listening {
						listening++
					} else if rh, _, _ := net.SplitHostPort(s.remote); rh != "127.0.0.1" {
						t.Errorf("rank %d is connected to %s", r, s.remote)
					}
				}
				t.Logf("rank %d: %v", r, socks)
				if tc.listen != (listening > 0) {
					t.Errorf("rank %d listens on %d sockets (%v); want some: %v", r, listening, socks, tc.listen)
				}
				if p := unixPaths(pid); len(p) > 0 {
					t.Errorf("rank %d has Unix sockets bound to paths: %v", r, p)
				}
			}
			if socks := tcpSockets(t, j.cmd.Process.Pid); len(socks) > 0 {
				t.Errorf("gocollrun has TCP sockets in a one-host job: %v", socks)
			}
			stop(t, j)
		})
	}
}

// listenPort returns the port pid listens on (its first listening socket).
func listenPort(t *testing.T, pid int) string {
	for _, s := range tcpSockets(t, pid) {
		if s.listening {
			return s.local
		}
	}
	t.Fatalf("process %d listens on no TCP port", pid)
	return ""
}

// A connection to a rank's TCP port that cannot prove it knows the job's
// secret is refused and logged, while the job goes on unharmed: garbage,
// a well-formed hello followed by a wrong MAC, and a hello for another
// rank.
func TestTCPConnectionWithoutSecretRefused(t *testing.T) {
	j, pids := runningJob(t, 3, []string{"GOCOLL_TRANSPORT=tcp", "GOCOLL_ALLREDUCE_ALGORITHM=ring"})
	addr := listenPort(t, pids[1])
	hello := func(from, to uint32) []byte {
		b := []byte("gocollT1")
		for _, v := range []uint32{2, from, to} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		nonce := make([]byte, 32)
		rand.Read(nonce)
		return append(b, nonce...)
	}
	for _, tc := range []struct {
		name string
		talk func(c net.Conn) error
		log  string
	}{
		{"garbage", func(c net.Conn) error {
			_, err := c.Write([]byte(strings.Repeat("GET / HTTP/1.1\r\n", 4)))
			return err
		}, "authentication failed"},
		{"wrong MAC", func(c net.Conn) error {
			if _, err := c.Write(hello(0, 1)); err != nil {
				return err
			}
			challenge := make([]byte, 8+4+4+32+32)
			if _, err := io.ReadFull(c, challenge); err != nil {
				return fmt.Errorf("no challenge: %v", err)
			}
			mac := make([]byte, 32)
			rand.Read(mac)
			_, err := c.Write(mac)
			return err
		}, "wrong MAC"},
		{"another rank", func(c net.Conn) error {
			_, err := c.Write(hello(0, 2))
			return err
		}, "authentication failed"},
	} {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(15 * time.Second))
		if err := tc.talk(c); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		// The rank closes the connection: no verdict, no frame.
		if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
			t.Errorf("%s: read %d bytes, %v; want the connection closed", tc.name, n, err)
		}
		c.Close()
		re := regexp.MustCompile(fmt.Sprintf(`^gocoll/tcp: rank 1: refused connection from %s: .*%s`, regexp.QuoteMeta(c.LocalAddr().String()), tc.log))
		j.waitFor(re, 1, 10*time.Second)
	}
	time.Sleep(300 * time.Millisecond) // the ranks go on with their allreduces
	stop(t, j)
}

// gocollrun's port, open for the proxies of other hosts, listens where
// --bind says, and refuses and logs a connection that does not prove it
// knows the job's secret, while the job goes on.
func TestPMIConnectionWithoutIDRefused(t *testing.T) {
	// Rank 1 "runs on" host fake through a launcher that is a local
	// command: its proxy reaches gocollrun over TCP.
	env := []string{"GOCOLL_TCP_ADDR=127.0.0.1"}
	j, _ := runningJob(t, 2, env, "--host", "localhost:1,fake:1", "--launcher", "env GOCOLL_LAUNCHED_ON=%h", "--bind", "127.0.0.1")
	socks := tcpSockets(t, j.cmd.Process.Pid)
	var pmi string
	for _, s := range socks {
		if s.listening {
			if pmi != "" {
				t.Errorf("gocollrun listens on more than one port: %v", socks)
			}
			pmi = s.local
		}
	}
	t.Logf("gocollrun: %v", socks)
	if host, _, _ := net.SplitHostPort(pmi); host != "127.0.0.1" {
		t.Fatalf("gocollrun's PMI port is %q, want it on --bind 127.0.0.1 (%v)", pmi, socks)
	}
	for _, first := range []string{"cmd=initack pmiid=12345\n", "cmd=get kvsname=x key=gocoll-tcp-secret\n", "\x00\x01garbage\n"} {
		c, err := net.DialTimeout("tcp", pmi, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte(first))
		got, _ := io.ReadAll(bufio.NewReader(c))
		if len(got) > 0 {
			t.Errorf("%q: the PMI server answered %q", first, got)
		}
		c.Close()
		re := regexp.MustCompile(fmt.Sprintf(`^gocollrun: warning: a PMI connection: PMI protocol error: connection from %s`, regexp.QuoteMeta(c.LocalAddr().String())))
		j.waitFor(re, 1, 10*time.Second)
	}
	time.Sleep(300 * time.Millisecond)
	stop(t, j)
}

// The shared-memory segments of a running job (the transport's, and the
// shm algorithms' one per communicator) are mode 0600, owned by the job's
// user, and already unlinked: only the ranks' mappings hold them.
func TestSegmentsArePrivate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reading /proc/PID/map_files needs root (CAP_SYS_ADMIN); run the tests as root to check segment modes")
	}
	j, pids := runningJob(t, 3, nil)
	var jobID string
	if m := ready.FindStringSubmatch(strings.Split(j.output(), "\n")[0]); m != nil {
		jobID = m[3]
	}
	for r, pid := range pids {
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(string(maps), "\n") {
			fs := strings.Fields(line)
			if len(fs) < 6 || !strings.HasPrefix(fs[5], "/dev/shm/gocoll-") {
				continue
			}
			name := fs[5]
			if !strings.Contains(name, jobID) {
				t.Errorf("rank %d maps %s, not named after its job %s", r, name, jobID)
			}
			if !strings.HasSuffix(line, "(deleted)") {
				t.Errorf("rank %d maps %s, which is still linked", r, name)
			}
			fi, err := os.Stat(fmt.Sprintf("/proc/%d/map_files/%s", pid, fs[0]))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm() != 0o600 || int(st.Uid) != os.Geteuid() {
				t.Errorf("rank %d: %s has mode %o, owner %d; want 0600, %d", r, name, fi.Mode().Perm(), st.Uid, os.Geteuid())
			}
			seen[name] = true
		}
		// The transport's segment, MPI_COMM_WORLD's and the split's.
		t.Logf("rank %d maps %v", r, seen)
		if len(seen) < 3 {
			t.Errorf("rank %d maps %d gocoll segments, want 3: %v", r, len(seen), seen)
		}
	}
	if left, _ := filepath.Glob("/dev/shm/gocoll-" + jobID + "*"); len(left) > 0 {
		t.Errorf("segments still have names while the job runs: %v", left)
	}
	stop(t, j)
}
