package cluster

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// Slurm is a single-node Slurm cluster of this machine, with its own munge
// daemon, ports, configuration and state under one temporary directory:
// nothing of the system's Slurm or munge (if any) is used or touched.
type Slurm struct {
	Dir  string // everything lives here; removed at cleanup
	Conf string // slurm.conf, as SLURM_CONF
	Node string // the node's name: this host's name
}

// The daemons' binaries, from Debian's slurm-wlm and munge packages.
var slurmBins = []string{"munged", "slurmctld", "slurmd", "srun", "sinfo", "squeue", "scancel"}

// StartSlurm starts munged, slurmctld and slurmd as root and waits until
// the node is idle. Everything is stopped, and the directory removed, in
// t.Cleanup, whatever happens. The node claims 8 CPUs whatever the
// machine has (config_overrides), so that 4 tasks fit on a 2-core box.
func StartSlurm(t *testing.T) *Slurm {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the Slurm tests start slurmctld, slurmd and munged, and must run as root")
	}
	for _, b := range slurmBins {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("%s is not installed: apt-get install slurm-wlm munge (tools/cluster-deps.sh does)", b)
		}
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "gocoll-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Slurm{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Node: host}
	var daemons []*exec.Cmd
	t.Cleanup(func() { s.stop(t, daemons) })

	// munge: a fresh key; munged refuses a socket directory others cannot
	// enter, and -f lets it run as root with its files under /tmp.
	munge := filepath.Join(dir, "munge")
	must(t, os.Mkdir(munge, 0o755))
	key := make([]byte, 1024)
	rand.Read(key)
	must(t, os.WriteFile(filepath.Join(munge, "munge.key"), key, 0o600))
	sock := filepath.Join(munge, "munge.sock")
	daemons = append(daemons, s.start(t, "munged", "--foreground", "-f",
		"--socket="+sock, "--key-file="+filepath.Join(munge, "munge.key"),
		"--pid-file="+filepath.Join(munge, "munged.pid"), "--log-file="+filepath.Join(munge, "munged.log"),
		"--seed-file="+filepath.Join(munge, "munged.seed")))
	waitFor(t, 10*time.Second, "munged's socket", func() bool { _, err := os.Stat(sock); return err == nil })

	for _, d := range []string{"state", "spool"} {
		must(t, os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	conf := fmt.Sprintf(`ClusterName=gocolltest
SlurmctldHost=%[2]s(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
AuthType=auth/munge
AuthInfo=socket=%[5]s
CredType=cred/munge
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/slurmd.pid
SlurmctldLogFile=%[1]s/slurmctld.log
SlurmdLogFile=%[1]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
InactiveLimit=0
KillWait=2
MinJobAge=5
NodeName=%[2]s NodeAddr=127.0.0.1 CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 State=UNKNOWN
PartitionName=debug Nodes=%[2]s Default=YES OverSubscribe=FORCE MaxTime=5 State=UP
`, dir, host, freePort(t), freePort(t), sock)
	must(t, os.WriteFile(s.Conf, []byte(conf), 0o644))
	// -i: ignore state a previous controller might have left (none here).
	daemons = append(daemons, s.start(t, "slurmctld", "-D", "-i", "-f", s.Conf))
	daemons = append(daemons, s.start(t, "slurmd", "-D", "-f", s.Conf, "-N", host))
	waitFor(t, 30*time.Second, "the node to be idle in sinfo", func() bool {
		out, _ := s.command("sinfo", "-h", "-o", "%t").Output()
		return strings.TrimSpace(string(out)) == "idle"
	})
	return s
}

// start runs a daemon in the foreground, its output in Dir/<name>.out; it
// dies with the test binary (Pdeathsig) even if cleanup never runs.
func (s *Slurm) start(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	out, err := os.Create(filepath.Join(s.Dir, name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := s.command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	return cmd
}

// command is a Slurm command with this cluster's SLURM_CONF and no Slurm
// variable of an enclosing job.
func (s *Slurm) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = s.Env()
	return cmd
}

// Env is harness.BaseEnv without SLURM_ variables, plus SLURM_CONF and
// extra.
func (s *Slurm) Env(extra ...string) []string {
	var env []string
	for _, kv := range harness.BaseEnv() {
		if !strings.HasPrefix(kv, "SLURM_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "SLURM_CONF="+s.Conf), extra...)
}

// Srun runs srun with args (a time limit of one minute comes first) and
// returns its combined output and exit status; past limit it kills srun
// and fails the test as a hang.
func (s *Slurm) Srun(t *testing.T, limit time.Duration, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("srun", append([]string{"--time=1", "--kill-on-bad-exit=1"}, args...)...)
	cmd.Env = s.Env(env...)
	return harness.RunCmd(t, limit, cmd, func() { s.command("scancel", "--partition=debug").Run() })
}

// stop cancels what is left of the jobs, stops the daemons (TERM, then
// KILL after 5 s) and removes the directory. On a failed test it shows
// the daemons' logs first.
func (s *Slurm) stop(t *testing.T, daemons []*exec.Cmd) {
	if len(daemons) > 1 {
		s.command("scancel", "--partition=debug").Run()
		waitFor(nil, 10*time.Second, "", func() bool {
			out, err := s.command("squeue", "-h").Output()
			return err != nil || strings.TrimSpace(string(out)) == ""
		})
	}
	for i := len(daemons) - 1; i >= 0; i-- {
		d := daemons[i]
		syscall.Kill(-d.Process.Pid, syscall.SIGTERM)
		exited := make(chan struct{})
		go func() { d.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-d.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	if t.Failed() {
		for _, log := range []string{"slurmctld.log", "slurmd.log", "munged.out"} {
			b, _ := os.ReadFile(filepath.Join(s.Dir, log))
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s (end):\n%s", log, b)
		}
	}
	os.RemoveAll(s.Dir)
}

// freePort is a TCP port that nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls ok every 100 ms until it holds; after limit it fails t
// (when not nil) naming what.
func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	if t != nil {
		t.Fatalf("waited %v for %s", limit, what)
	}
	return false
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
