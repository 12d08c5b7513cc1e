package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// rank is one process of the job.
type rank struct {
	id      int
	host    string
	local   bool
	started bool // an exit notice will come
	cmd     *exec.Cmd
	pid     int        // local ranks
	proxy   *hostProxy // remote ranks: the proxy that started it
	// remotePid is the pid on its host, once the proxy has said it.
	remotePid atomic.Int64

	// Set by the job loop when the process has been waited for.
	exited bool
	state  *exitStatus
	// aborted: the rank called PMI abort. sent: the signals gocollrun
	// has sent it.
	aborted bool
	sent    map[syscall.Signal]bool
}

// endedBySignalSent reports whether the process was killed by a signal
// gocollrun had sent it: an end the job's termination explains.
func (r *rank) endedBySignalSent(s exitStatus) bool {
	return s.sig != 0 && r.sent[s.sig]
}

// name is how messages refer to the rank.
func (r *rank) name() string {
	if r.local {
		return fmt.Sprintf("rank %d (pid %d)", r.id, r.pid)
	}
	if pid := r.remotePid.Load(); pid > 0 {
		return fmt.Sprintf("rank %d (on %s, pid %d)", r.id, r.host, pid)
	}
	return fmt.Sprintf("rank %d (on %s)", r.id, r.host)
}

// rankEnv is the environment of a rank: gocollrun's own, less anything a
// launcher sets, plus the job's variables.
func rankEnv(base []string, vars map[string]string) []string {
	env := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := vars[k]; ours || strings.HasPrefix(k, "PMI_") {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// hostSpecific names variables that describe this host or session and
// must not be copied to another host.
func hostSpecific(k string) bool {
	switch k {
	case "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "DISPLAY", "XAUTHORITY":
		return true
	}
	return strings.HasPrefix(k, "SSH_")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// procAttr puts each rank in its own process group, so that signals
// reach a rank's children too (a launcher wrapper, a shell script), and
// kills the rank if gocollrun itself dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signal sends sig to the rank's process group: directly, or through
// the proxy on the rank's host.
func (r *rank) signal(sig syscall.Signal) {
	if !r.started || r.exited {
		if r.local && r.pid > 0 {
			// An exited rank's children may linger in its group.
			syscall.Kill(-r.pid, sig)
		}
		return
	}
	if r.sent == nil {
		r.sent = map[syscall.Signal]bool{}
	}
	r.sent[sig] = true
	if r.local {
		syscall.Kill(-r.pid, sig)
		return
	}
	r.proxy.signal(r.id, sig)
}

// exitStatus is how a process ended: killed by sig, or else exited with
// code.
type exitStatus struct {
	code int
	sig  syscall.Signal
}

// statusOf reads a waited-for process's status.
func statusOf(ps *os.ProcessState) exitStatus {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitStatus{sig: ws.Signal()}
	}
	return exitStatus{code: ps.ExitCode()}
}

// exitCode is the status gocollrun reports for a process: its exit
// status, or 128+n for a death by signal n.
func (s exitStatus) exitCode() int {
	if s.sig != 0 {
		return 128 + int(s.sig)
	}
	return s.code
}

// String says how a process ended, for messages.
func (s exitStatus) String() string {
	if s.sig != 0 {
		return fmt.Sprintf("killed by signal %d (%s)", int(s.sig), signalName(s.sig))
	}
	return "exited with status " + strconv.Itoa(s.code)
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
