// Package job starts a process's part of a gocoll job: it finds the
// launcher (gocollrun, MPICH's hydra, Slurm's srun or Open MPI's mpirun,
// through PMI-1, PMI-2 or PMIx; a single rank only where there is none),
// exchanges one card per rank through it, learns from the cards which
// ranks share its host, and builds the world transport: shared memory to
// ranks on the same host, TCP to the others, chosen per pair of ranks.
// The C ABI and the Go API both start here.
package job

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/envvar"
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
	// JobID names the job's shared-memory segments: GOCOLL_JOB_ID, else
	// a name rank 0 made and shared; Timeout is GOCOLL_TIMEOUT.
	JobID   string
	Timeout time.Duration
	// Launcher started the process; nil for a single rank without one.
	Launcher bootstrap.Launcher

	closers []func() error
	debug   bool // GOCOLL_DEBUG=info: say what start-up did
}

// DefaultTimeout is how long a peer may make no progress before
// collectives fail (GOCOLL_TIMEOUT).
const DefaultTimeout = envvar.DefaultTimeout

// Start joins the job: it finds the launcher (findLauncher), exchanges one
// card per rank through it (Launcher.Allgather: one put, one fence, the
// cards fetched in bulk where the launcher can) and builds the transports
// from the cards. Only a process that no launcher started is rank 0 of 1.
// Its settings are the environment's now (envvar.Parse), as
// coll.ConfigFromEnv's: a Go program may set them before mpi.Init.
func Start() (*Job, error) {
	set, err := envvar.Parse(os.Getenv)
	if err != nil {
		return nil, err
	}
	return StartWith(set)
}

// StartWith is Start with the settings already parsed (envvar.Parse):
// GOCOLL_TIMEOUT, GOCOLL_TRANSPORT, GOCOLL_PMI and GOCOLL_DEBUG. The
// variables gocollrun sets for its ranks (GOCOLL_JOB_ID,
// GOCOLL_JOB_SECRET, GOCOLL_TCP_ADDR, GOCOLL_NUM_HOSTS; GOCOLL_HOST in
// package bootstrap) are not settings but the launcher's protocol, read
// here like PMI_FD.
func StartWith(set envvar.Settings) (*Job, error) {
	timeout, mode := set.Timeout, set.Transport
	if mode == "hostmpi" {
		return nil, errors.New("GOCOLL_TRANSPORT=hostmpi: only under LD_PRELOAD (there is no host MPI here); want auto, shm or tcp")
	}

	l, err := findLauncher(set.PMI)
	if err != nil {
		return nil, err
	}
	jobID := os.Getenv("GOCOLL_JOB_ID")
	if l == nil {
		if jobID == "" {
			jobID = fmt.Sprintf("p%d", os.Getpid())
		}
		return &Job{Rank: 0, Size: 1, Hosts: []string{bootstrap.HostID()}, T: inproc.New(1)[0],
			JobID: jobID, Timeout: timeout}, nil
	}
	began := time.Now()
	j := &Job{Rank: l.Rank(), Size: l.Size(), Launcher: l, JobID: jobID, Timeout: timeout, debug: set.Debug}
	if err := j.connect(mode); err != nil {
		j.Close()
		return nil, fmt.Errorf("starting under %s: %w", l.Name(), err)
	}
	if j.debug {
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: start-up under %s took %v: %v\n",
			j.Rank, l.Name(), time.Since(began).Round(time.Microsecond), l.Traffic())
	}
	return j, nil
}

// card is what a rank tells the others at start-up, all in one blob.
type card struct {
	Host string `json:"h"`           // bootstrap.HostID
	Shm  string `json:"s,omitempty"` // shm.Card, unless GOCOLL_TRANSPORT=tcp
	TCP  string `json:"t,omitempty"` // the tcp transport's address, where it listens
	// Rank 0's only: the name of the job's segments (where GOCOLL_JOB_ID
	// is unset) and the tcp transport's secret (where GOCOLL_JOB_SECRET
	// is unset).
	Job    string `json:"j,omitempty"`
	Secret string `json:"k,omitempty"`
}

// connect exchanges the cards and builds the transports: shm for peers on
// this host, tcp for the others. The tcp listener is made before the
// exchange where the ranks may span hosts (sameHost), so that one
// exchange does; where the launcher could not say, the cards tell, and a
// second exchange carries the addresses only if they do span hosts.
func (j *Job) connect(mode string) (err error) {
	// The tcp listener, until Connect hands it to j.closers.
	var tc *tcp.Endpoint
	defer func() {
		if err != nil && tc != nil {
			tc.Close()
		}
	}()
	secret, err := hex.DecodeString(os.Getenv("GOCOLL_JOB_SECRET"))
	if err != nil {
		return errors.New("GOCOLL_JOB_SECRET is not hex")
	}
	mine := card{Host: bootstrap.HostID()}
	if mode != "tcp" {
		mine.Shm = shm.MyCard().String()
	}
	if j.Rank == 0 {
		if j.JobID == "" {
			mine.Job = shm.NewJobName()
		}
		if len(secret) == 0 {
			mine.Secret = hex.EncodeToString(tcp.NewSecret())
		}
	}
	oneHost, known := sameHost(j.Launcher)
	if tu, ok := j.Launcher.(bootstrap.TreeUser); ok {
		// Without a bulk get, the cards go over a TCP tree (16 ranks on).
		addr, err := tcpAddr(oneHost && known)
		if err != nil {
			return err
		}
		tu.UseTree(bootstrap.TreeOptions{Addr: addr, Timeout: j.Timeout})
		defer tu.EndTree()
	}
	if mode == "tcp" || !known || !oneHost {
		if tc, err = j.listenTCP(oneHost && known); err != nil {
			return err
		}
		mine.TCP = tc.ListenAddr()
	}
	cards, err := j.exchange(mine)
	if err != nil {
		return err
	}
	j.Hosts = make([]string, j.Size)
	for r, c := range cards {
		j.Hosts[r] = c.Host
	}
	if j.JobID == "" {
		j.JobID = cards[0].Job
	}
	if len(secret) == 0 {
		if secret, err = hex.DecodeString(cards[0].Secret); err != nil || len(secret) == 0 {
			return errors.New("rank 0's card has no tcp secret")
		}
	}
	// The transports in order of preference: shared memory to the ranks
	// on this host (the same grouping as shm.Join's), tcp to any rank.
	var shmCards []shm.Card
	if mode != "tcp" {
		shmCards = make([]shm.Card, j.Size)
		for r, c := range cards {
			if shmCards[r], err = shm.ParseCard(c.Shm); err != nil {
				return fmt.Errorf("rank %d's card: %w", r, err)
			}
		}
	}
	table := route.Table{{
		Name:    "shm",
		Reaches: func(peer int) bool { return shmCards != nil && shmCards[peer].Host == shmCards[j.Rank].Host },
		New: func() (transport.Transport, error) {
			sm, err := shm.Join(j.Rank, shmCards, shm.Options{JobID: j.JobID, Timeout: j.Timeout})
			if err != nil {
				return nil, err
			}
			j.closers = append(j.closers, sm.Close)
			return sm, nil
		},
	}, {
		Name:    "tcp",
		Reaches: func(int) bool { return true },
		New: func() (transport.Transport, error) {
			addrs := make([]string, j.Size)
			for r, c := range cards {
				addrs[r] = c.TCP
			}
			if err := tc.Connect(addrs, secret); err != nil {
				return nil, err
			}
			j.closers = append(j.closers, tc.Close)
			return tc, nil
		},
		Unused: func() {
			if tc != nil {
				tc.Close() // listened in case the ranks spanned hosts; they do not
				tc = nil
			}
		},
	}}
	plan, err := table.Pick(j.Rank, j.Size, mode)
	if err != nil {
		return err
	}
	if tc == nil && plan.Uses("tcp") {
		// The launcher could not say the ranks span hosts: the addresses
		// travel in a second exchange. Every rank uses tcp or none does:
		// a rank has a peer on another host if any rank has.
		if tc, err = j.listenTCP(false); err != nil {
			return err
		}
		if cards, err = j.exchange(card{TCP: tc.ListenAddr()}); err != nil {
			return err
		}
	}
	if j.debug {
		listen := ""
		if tc != nil && plan.Uses("tcp") {
			listen = " (tcp on " + tc.ListenAddr() + ")"
		}
		fmt.Fprintf(os.Stderr, "gocoll: rank %d on host %s: transports %s%s\n", j.Rank, bootstrap.HostID(), plan, listen)
	}
	j.T, err = plan.Build()
	return err
}

// listenTCP starts the tcp transport's listener (tcp.Listen).
func (j *Job) listenTCP(oneHost bool) (*tcp.Endpoint, error) {
	addr, err := tcpAddr(oneHost)
	if err != nil {
		return nil, err
	}
	tc, err := tcp.Listen(j.Rank, j.Size, tcp.Options{Addr: addr, Timeout: j.Timeout})
	if err != nil {
		tc.Close()
		return nil, fmt.Errorf("tcp transport: %w", err)
	}
	return tc, nil
}

// exchange is one Allgather of the cards through the launcher.
func (j *Job) exchange(mine card) ([]card, error) {
	blob, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	blobs, err := j.Launcher.Allgather(blob)
	if err != nil {
		return nil, err
	}
	cards := make([]card, len(blobs))
	for r, b := range blobs {
		if err := json.Unmarshal(b, &cards[r]); err != nil {
			return nil, fmt.Errorf("rank %d's card: %w", r, err)
		}
	}
	return cards, nil
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

// Launched reports whether a launcher started the process.
func (j *Job) Launched() bool { return j.Launcher != nil }

// Abort asks the launcher to kill the whole job with exit code code, then
// exits. It does not return.
func (j *Job) Abort(code int, msg string) {
	if j != nil && j.Launcher != nil {
		j.Launcher.Abort(code, msg)
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
	if j.Launcher != nil {
		errs = append(errs, j.Launcher.Finalize())
	}
	return errors.Join(errs...)
}
