package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
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
	server *pmi.Server
	out    *output
	stderr io.Writer // gocollrun's own messages

	// State of the watch loop.
	live   int              // ranks not yet waited for
	ending bool             // the job is being terminated
	code   int              // gocollrun's exit status
	grace  <-chan time.Time // when to escalate to SIGKILL
}

// exitNotice is what a rank's waiter goroutine reports.
type exitNotice struct {
	rank  int
	state *os.ProcessState // nil if Wait failed without one
}

func newJob(o options, stderr io.Writer) (*job, error) {
	hosts, err := place(o.hosts, o.n)
	if err != nil {
		return nil, err
	}
	j := &job{
		opts:   o,
		id:     randomHex(8),
		secret: randomHex(32),
		out:    newOutput(o.tagOutput),
		stderr: stderr,
	}
	j.server = pmi.NewServer(o.n, "gocoll_"+j.id)
	for i, h := range hosts {
		j.ranks = append(j.ranks, &rank{id: i, host: h, local: h == localHost})
	}
	return j, nil
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
	code, started := j.start(notices)
	j.live = started
	if started < len(j.ranks) {
		j.code = code
		j.terminate(syscall.SIGTERM)
	}
	j.watch(notices, sigs)
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
				if r.cmd != nil && !r.exited {
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
		if n.state != nil && !r.aborted && !r.endedBySignalSent(n.state) && exitCode(n.state) != 0 {
			j.logf("%s %s", r.name(), describeExit(n.state))
		}
		return
	}
	if n.state == nil {
		j.fail(1, "lost track of %s", r.name())
		return
	}
	if code := exitCode(n.state); code != 0 {
		if j.live == 0 {
			j.code, j.ending = code, true
			j.logf("%s %s", r.name(), describeExit(n.state))
			return
		}
		j.fail(code, "%s %s; terminating the job", r.name(), describeExit(n.state))
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
			how = describeExit(other.state)
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
