package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/gocoll/gocoll/pmi"
)

// Exit statuses of gocollrun itself, where no rank's status applies.
const (
	exitUsage    = 2   // bad command line
	exitStuck    = 1   // a PMI barrier could never complete
	exitTimeout  = 124 // --timeout expired, as with timeout(1)
	exitNoStart  = 126 // a rank could not be started
	exitNotFound = 127 // the program was not found
)

// killGrace is how long ranks have between SIGTERM (or a forwarded
// signal) and SIGKILL.
const killGrace = 3 * time.Second

// outputGrace is how long gocollrun waits, after the last rank exits, for
// the output pipes to drain (a rank's children may still hold them).
const outputGrace = 2 * time.Second

// job is one run of gocollrun: the ranks, the PMI server, and the loop
// that watches them.
type job struct {
	opts   options
	id     string // GOCOLL_JOB_ID
	secret string // GOCOLL_JOB_SECRET; never printed
	ranks  []*rank
	hosts  []*hostProxy // the remote hosts
	// numHosts counts the ranks' different hosts, for GOCOLL_NUM_HOSTS.
	numHosts int
	server   *pmi.Server
	// listener is where the remote hosts' proxies connect, if any.
	listener net.Listener
	out      *output
	stderr   io.Writer // gocollrun's own messages

	// State of the watch loop.
	live   int              // ranks not yet waited for
	ending bool             // the job is being terminated
	code   int              // gocollrun's exit status
	grace  <-chan time.Time // when to escalate to SIGKILL
}

// exitNotice is what a rank's waiter goroutine, or the proxy of its
// host, reports: how it ended, or, without that, why not known (or why
// it could not start, with noStart) and the exit status to use.
type exitNotice struct {
	rank    int
	state   *exitStatus
	why     string
	code    int
	noStart bool
}

func newJob(o options, stderr io.Writer) (*job, error) {
	entries, source, err := jobHosts(o)
	if err != nil {
		return nil, err
	}
	hosts, err := place(entries, o.n, o.mapBy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	j := &job{
		opts:   o,
		id:     randomHex(8),
		secret: randomHex(32),
		out:    newOutput(o.tagOutput),
		stderr: stderr,
	}
	j.server = pmi.NewServer(o.n, "gocoll_"+j.id)
	seen := map[string]bool{}
	for i, h := range hosts {
		j.ranks = append(j.ranks, &rank{id: i, host: h, local: h == localHost})
		seen[h] = true
	}
	j.numHosts = len(seen)
	j.groupHosts()
	if o.verbose {
		j.logf("hosts from %s", source)
		j.describePlacement()
	}
	return j, nil
}

// jobHosts returns the hosts from --host, --hostfile or, inside a Slurm
// allocation, SLURM_JOB_NODELIST, and says which.
func jobHosts(o options) ([]hostEntry, string, error) {
	switch {
	case strings.TrimSpace(o.hosts) != "":
		h, err := parseHosts(o.hosts)
		return h, "--host " + o.hosts, err
	case o.hostfile != "":
		h, err := readHostfile(o.hostfile)
		return h, "--hostfile " + o.hostfile, err
	case os.Getenv("SLURM_JOB_NODELIST") != "":
		list := os.Getenv("SLURM_JOB_NODELIST")
		names, err := expandHostList(list)
		if err != nil {
			return nil, "", fmt.Errorf("SLURM_JOB_NODELIST: %w", err)
		}
		h := make([]hostEntry, len(names))
		for i, n := range names {
			h[i] = hostEntry{name: n}
		}
		source := "SLURM_JOB_NODELIST=" + list
		// The allocation's tasks per node are the slots, where given.
		if tasks := os.Getenv("SLURM_TASKS_PER_NODE"); tasks != "" {
			slots, err := tasksPerNode(tasks)
			if err == nil && len(slots) != len(h) {
				err = fmt.Errorf("%d counts for the %d nodes of SLURM_JOB_NODELIST", len(slots), len(h))
			}
			if err != nil {
				return nil, "", fmt.Errorf("SLURM_TASKS_PER_NODE: %w", err)
			}
			for i := range h {
				h[i].slots = slots[i]
			}
			source += " with slots from SLURM_TASKS_PER_NODE=" + tasks
		}
		return h, source + " (no --host or --hostfile given)", nil
	}
	return nil, "nowhere (no --host, --hostfile or SLURM_JOB_NODELIST): every rank runs on this machine", nil
}

// describePlacement says, for -v, where each host's ranks run.
func (j *job) describePlacement() {
	var local []*rank
	for _, r := range j.ranks {
		if r.local {
			local = append(local, r)
		}
	}
	if len(local) > 0 {
		j.logf("%s: %s, started directly", localHost, rankList(local))
	}
	for _, h := range j.hosts {
		j.logf("%s: %s, started by one proxy through the launcher", h.host, rankList(h.ranks))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (j *job) logf(format string, args ...any) {
	fmt.Fprintf(j.stderr, "gocollrun: "+format+"\n", args...)
}

// run starts the ranks, watches them until all have ended, cleans up and
// returns gocollrun's exit status.
func (j *job) run() int {
	// Ranks get SIGKILL when the thread that started them ends
	// (Pdeathsig); pin this goroutine, which starts them all, to a thread
	// that lives as long as gocollrun (go.dev/issue/27505).
	runtime.LockOSThread()

	// Catch signals before any rank exists, so that none is missed.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	notices := make(chan exitNotice, len(j.ranks))
	code := j.start(notices)
	for _, r := range j.ranks {
		if r.started {
			j.live++
		}
	}
	if code != 0 {
		j.code = code
		j.terminate(syscall.SIGTERM)
	}
	j.watch(notices, sigs)
	if j.listener != nil {
		j.listener.Close()
	}
	j.server.Close()
	j.out.wait(outputGrace)
	j.removeShm()
	return j.code
}

// watch handles rank exits, PMI events, signals and the timeout until
// every started rank has been waited for.
func (j *job) watch(notices <-chan exitNotice, sigs <-chan os.Signal) {
	var timeout <-chan time.Time
	if j.opts.timeout > 0 {
		t := time.NewTimer(j.opts.timeout)
		defer t.Stop()
		timeout = t.C
	}
	for j.live > 0 {
		select {
		case n := <-notices:
			j.exited(n)
		case e := <-j.server.Events():
			j.pmiEvent(e)
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if j.ending {
				j.logf("received %s again; killing the job", signalName(sig))
				j.terminate(syscall.SIGKILL)
				continue
			}
			j.failWith(128+int(sig), sig, "received %s; passing it on to the ranks and terminating the job", signalName(sig))
		case <-timeout:
			j.fail(exitTimeout, "the job ran longer than --timeout %v; terminating it", j.opts.timeout)
		case <-j.grace:
			j.grace = nil
			for _, r := range j.ranks {
				if r.started && !r.exited {
					j.logf("%s did not exit within %v; sending SIGKILL", r.name(), killGrace)
				}
			}
			j.terminate(syscall.SIGKILL)
		}
	}
}

// exited records a rank's end and decides what it means for the job.
func (j *job) exited(n exitNotice) {
	r := j.ranks[n.rank]
	r.exited, r.state = true, n.state
	j.live--
	j.server.Exited(r.id)
	if j.ending {
		// A rank that failed by itself while the job was already
		// ending (another rank noticed its death first and aborted)
		// is still the news: say how it ended.
		if s := n.state; s != nil && !r.aborted && !r.endedBySignalSent(*s) && s.exitCode() != 0 {
			j.logf("%s %s", r.name(), s)
		}
		return
	}
	if n.state == nil {
		code := max(n.code, 1)
		if n.noStart {
			j.fail(code, "cannot start %s: %s; terminating the job", r.name(), n.why)
			return
		}
		j.fail(code, "lost track of %s: %s; terminating the job", r.name(), n.why)
		return
	}
	if code := n.state.exitCode(); code != 0 {
		if j.live == 0 {
			j.code, j.ending = code, true
			j.logf("%s %s", r.name(), n.state)
			return
		}
		j.fail(code, "%s %s; terminating the job", r.name(), n.state)
		return
	}
	if j.live > 0 && !j.server.Finalized(r.id) && j.usesPMI(r.id) {
		j.logf("warning: %s exited with status 0 without calling PMI finalize while other ranks still run", r.name())
	}
}

// usesPMI tells whether rank, or failing that any rank, has initialized
// PMI: programs that never talk PMI (hostname, a shell) need no finalize.
func (j *job) usesPMI(rank int) bool {
	if j.server.Initialized(rank) {
		return true
	}
	for _, r := range j.ranks {
		if j.server.Initialized(r.id) {
			return true
		}
	}
	return false
}

// pmiEvent acts on what the PMI server reports.
func (j *job) pmiEvent(e pmi.Event) {
	switch e.Kind {
	case pmi.Abort:
		if e.Rank >= 0 && e.Rank < len(j.ranks) {
			j.ranks[e.Rank].aborted = true
		}
		j.fail(e.Code, "%s called abort with exit code %d; terminating the job", j.ranks[e.Rank].name(), e.Code)
	case pmi.Stuck:
		other := j.ranks[e.Other]
		how := "ended"
		if other.state != nil {
			how = other.state.String()
		}
		fin := "without"
		if j.server.Finalized(other.id) {
			fin = "after"
		}
		j.fail(exitStuck, "rank %d waits in a PMI barrier that %s can never enter: it %s %s PMI finalize; terminating the job",
			e.Rank, other.name(), how, fin)
	case pmi.ProtocolError:
		who := "a PMI connection"
		if e.Rank >= 0 {
			who = fmt.Sprintf("rank %d", e.Rank)
		}
		j.logf("warning: %s: PMI protocol error: %s", who, e.Msg)
	}
}

// fail starts ending the job with exit status code, unless it is already
// ending: it says why, and sends every rank SIGTERM.
func (j *job) fail(code int, format string, args ...any) {
	j.failWith(code, syscall.SIGTERM, format, args...)
}

// failWith is fail with sig instead of SIGTERM.
func (j *job) failWith(code int, sig syscall.Signal, format string, args ...any) {
	if j.ending {
		return
	}
	j.code = code
	j.logf(format, args...)
	j.terminate(sig)
}

// terminate sends sig to every rank's process group (an exited rank's
// children may linger in it) and, the first time, arms the SIGKILL
// escalation.
func (j *job) terminate(sig syscall.Signal) {
	for _, r := range j.ranks {
		r.signal(sig)
	}
	if !j.ending && sig != syscall.SIGKILL {
		j.grace = time.After(killGrace)
	}
	j.ending = true
}
