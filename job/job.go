// Package job starts a process's part of a gocoll job: it finds the
// launcher (a PMI-1 server such as gocollrun or MPICH's hydra, or none for
// a single rank), learns which ranks share its host, and builds the world
// transport: shared memory to ranks on the same host, TCP to the others,
// chosen per pair of ranks. The C ABI and the Go API both start here.
package job

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/pmi"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/transport/route"
	"github.com/gocoll/gocoll/transport/shm"
	"github.com/gocoll/gocoll/transport/tcp"
)

// Job is this process's handle on the job.
type Job struct {
	Rank, Size int
	// Hosts holds the host of every rank (bootstrap.HostID).
	Hosts []string
	// T is the world transport, over job ranks.
	T transport.Transport
	// JobID names the job's shared-memory segments; Timeout is
	// GOCOLL_TIMEOUT.
	JobID   string
	Timeout time.Duration

	kvs     bootstrap.KVS
	pmi     bootstrap.Launcher // nil without a launcher
	closers []func() error
}

// DefaultTimeout is how long a peer may make no progress before
// collectives fail (GOCOLL_TIMEOUT).
const DefaultTimeout = 300 * time.Second

// Start joins the job. Without a PMI launcher the process is rank 0 of 1.
func Start() (*Job, error) {
	timeout, err := timeoutFromEnv()
	if err != nil {
		return nil, err
	}
	c, launched, err := pmi.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("connecting to the launcher (PMI): %w", err)
	}
	jobID := os.Getenv("GOCOLL_JOB_ID")
	if jobID == "" {
		jobID = fmt.Sprintf("p%d", os.Getpid())
	}
	if !launched {
		return &Job{Rank: 0, Size: 1, Hosts: []string{bootstrap.HostID()}, T: inproc.New(1)[0], kvs: bootstrap.Local(1)[0],
			JobID: jobID, Timeout: timeout}, nil
	}
	j := &Job{Rank: c.Rank(), Size: c.Size(), kvs: c, pmi: c, JobID: jobID, Timeout: timeout}
	if err := j.exchangeHosts(); err != nil {
		return nil, err
	}
	if err := j.transports(timeout); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

func timeoutFromEnv() (time.Duration, error) {
	v := os.Getenv("GOCOLL_TIMEOUT")
	if v == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		if secs, err2 := time.ParseDuration(v + "s"); err2 == nil {
			return secs, nil
		}
		return 0, fmt.Errorf("GOCOLL_TIMEOUT=%s: want a duration such as 300s or 5m", v)
	}
	return d, nil
}

// exchangeHosts learns every rank's host.
func (j *Job) exchangeHosts() error {
	me := bootstrap.HostID()
	if err := j.kvs.Put(fmt.Sprintf("gocoll-host-%d", j.Rank), hostKey(me)); err != nil {
		return err
	}
	if err := j.kvs.Fence(); err != nil {
		return err
	}
	j.Hosts = make([]string, j.Size)
	for r := range j.Size {
		v, err := j.kvs.Get(fmt.Sprintf("gocoll-host-%d", r))
		if err != nil {
			return err
		}
		j.Hosts[r] = v
	}
	return nil
}

// hostKey makes a host id safe as a KVS value (no spaces, no '=').
func hostKey(h string) string { return hex.EncodeToString([]byte(h)) }

// transports builds shm for same-host peers and tcp for the others, as
// GOCOLL_TRANSPORT allows (auto, shm, tcp).
func (j *Job) transports(timeout time.Duration) error {
	mode := strings.ToLower(os.Getenv("GOCOLL_TRANSPORT"))
	switch mode {
	case "", "auto", "shm", "tcp":
	default:
		return fmt.Errorf("GOCOLL_TRANSPORT=%s: want auto, shm or tcp", mode)
	}
	oneHost := true
	for _, h := range j.Hosts {
		oneHost = oneHost && h == j.Hosts[0]
	}
	if mode == "shm" && !oneHost {
		return errors.New("GOCOLL_TRANSPORT=shm: the ranks run on several hosts; shared memory cannot reach them all")
	}
	jobID := os.Getenv("GOCOLL_JOB_ID")
	var ts []transport.Transport
	var sm *shm.Endpoint
	if mode != "tcp" {
		var err error
		if sm, err = shm.New(j.kvs, shm.Options{JobID: jobID, Timeout: timeout}); err != nil {
			return fmt.Errorf("shared-memory transport: %w", err)
		}
		j.closers = append(j.closers, sm.Close)
		ts = append(ts, sm)
	}
	var tc *tcp.Endpoint
	var tcpListen string
	if mode == "tcp" || !oneHost {
		secret, err := hex.DecodeString(os.Getenv("GOCOLL_JOB_SECRET"))
		if err != nil {
			return errors.New("GOCOLL_JOB_SECRET is not hex")
		}
		addr, err := tcpAddr(oneHost)
		if err != nil {
			return err
		}
		tcpListen = addr
		if tc, err = tcp.New(j.kvs, tcp.Options{Addr: addr, Secret: secret, Timeout: timeout}); err != nil {
			return fmt.Errorf("tcp transport: %w", err)
		}
		j.closers = append(j.closers, tc.Close)
		ts = append(ts, tc)
	}
	reach := func(peer int) int { // index in ts
		if sm != nil && sm.Reaches(peer) {
			return 0
		}
		return len(ts) - 1
	}
	if strings.EqualFold(os.Getenv("GOCOLL_DEBUG"), "info") {
		names := map[transport.Transport]string{}
		if sm != nil {
			names[sm] = "shm"
		}
		if tc != nil {
			names[tc] = "tcp " + tcpListen
		}
		by := map[string][]int{}
		for peer := range j.Size {
			if peer != j.Rank {
				by[names[ts[reach(peer)]]] = append(by[names[ts[reach(peer)]]], peer)
			}
		}
		fmt.Fprintf(os.Stderr, "gocoll: rank %d on host %s: transports %v\n", j.Rank, bootstrap.HostID(), by)
	}
	if len(ts) == 1 {
		j.T = ts[0]
		return nil
	}
	j.T = route.New(j.Rank, j.Size, ts, reach)
	return nil
}

// tcpAddr picks the address to listen on: GOCOLL_TCP_ADDR, loopback when
// every rank shares this host, else the local address that routes to the
// launcher, else the first IPv4 address of a network interface.
func tcpAddr(oneHost bool) (string, error) {
	if a := os.Getenv("GOCOLL_TCP_ADDR"); a != "" {
		return a, nil
	}
	if oneHost {
		return "127.0.0.1", nil
	}
	if port := os.Getenv("PMI_PORT"); port != "" {
		// A UDP "connection" sends nothing; it only picks the route.
		if c, err := net.Dial("udp", port); err == nil {
			defer c.Close()
			return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
		}
	}
	// The first IPv4 address of an interface that is up and not the
	// loopback interface (its address may still be in 127/8, as on the
	// veth pairs of hosts emulated with network namespaces).
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil {
				return ip.IP.String(), nil
			}
		}
	}
	return "", errors.New("no address for the tcp transport: set GOCOLL_TCP_ADDR")
}

// OneHost reports whether every rank runs on this process's host.
func (j *Job) OneHost() bool {
	for _, h := range j.Hosts {
		if h != j.Hosts[0] {
			return false
		}
	}
	return true
}

// Launched reports whether a PMI launcher started the process.
func (j *Job) Launched() bool { return j.pmi != nil }

// Abort asks the launcher to kill the whole job with exit code code, then
// exits. It does not return.
func (j *Job) Abort(code int, msg string) {
	if j != nil && j.pmi != nil {
		j.pmi.Abort(code, msg)
	}
	os.Exit(code)
}

// Close leaves the job: closes the transports and says goodbye to the
// launcher.
func (j *Job) Close() error {
	var errs []error
	if j.T != nil {
		errs = append(errs, j.T.Close())
	}
	for _, c := range j.closers {
		c()
	}
	if j.pmi != nil {
		errs = append(errs, j.pmi.Finalize())
	}
	return errors.Join(errs...)
}
