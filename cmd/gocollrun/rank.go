package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// rank is one process of the job.
type rank struct {
	id    int
	host  string
	local bool
	cmd   *exec.Cmd
	pid   int

	// Set by the job loop when the process has been waited for.
	exited bool
	state  *os.ProcessState
	// aborted: the rank called PMI abort. sent: the signals gocollrun
	// has sent it.
	aborted bool
	sent    map[syscall.Signal]bool
}

// endedBySignalSent reports whether the process was killed by a signal
// gocollrun had sent it: an end the job's termination explains.
func (r *rank) endedBySignalSent(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && r.sent[ws.Signal()]
}

// name is how messages refer to the rank.
func (r *rank) name() string {
	if r.local {
		return fmt.Sprintf("rank %d (pid %d)", r.id, r.pid)
	}
	return fmt.Sprintf("rank %d (on %s, launcher pid %d)", r.id, r.host, r.pid)
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

// remoteArgv is the command line that starts prog on host through the
// launcher template: the template's words with %h replaced, then prog.
//
// An exec-style launcher ("ip netns exec %h", a wrapper script) passes its
// environment on, so the rank's environment is simply the launcher's. ssh
// and rsh do not: they hand one string to the remote shell, so the rank's
// command becomes a shell script that changes to this directory, reads
// GOCOLL_JOB_SECRET from standard input (secrets stay off command lines,
// which any user can list), and execs prog under `env` with every other
// variable. secretOnStdin reports whether the caller must feed the secret.
func remoteArgv(template, host string, env []string, prog []string) (argv []string, secretOnStdin bool, err error) {
	words := strings.Fields(template)
	if len(words) == 0 {
		return nil, false, fmt.Errorf("empty --launcher")
	}
	for _, w := range words {
		argv = append(argv, strings.ReplaceAll(w, "%h", host))
	}
	switch filepath.Base(words[0]) {
	case "ssh", "rsh":
	default:
		return append(argv, prog...), false, nil
	}
	var b strings.Builder
	if wd, err := os.Getwd(); err == nil {
		fmt.Fprintf(&b, "cd %s 2>/dev/null; ", shellQuote(wd))
	}
	b.WriteString("IFS= read -r GOCOLL_JOB_SECRET; export GOCOLL_JOB_SECRET; exec env")
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "GOCOLL_JOB_SECRET" || hostSpecific(k) {
			continue
		}
		b.WriteString(" " + shellQuote(kv))
	}
	for _, w := range prog {
		b.WriteString(" " + shellQuote(w))
	}
	return append(argv, b.String()), true, nil
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

// signal sends sig to the rank's process group.
func (r *rank) signal(sig syscall.Signal) {
	if r.pid > 0 {
		if r.sent == nil {
			r.sent = map[syscall.Signal]bool{}
		}
		r.sent[sig] = true
		syscall.Kill(-r.pid, sig)
	}
}

// exitCode is the status gocollrun reports for a process: its exit
// status, or 128+n for a death by signal n.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// describeExit says how a process ended, for messages.
func describeExit(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), signalName(ws.Signal()))
	}
	return "exited with status " + strconv.Itoa(ps.ExitCode())
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
