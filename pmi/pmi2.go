package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/gocoll/gocoll/bootstrap"
)

// Client2 is one rank's connection to a PMI-2 server: Slurm's srun
// --mpi=pmi2 (its slurmstepd serves the ranks of a node) or MPICH's hydra.
// It implements bootstrap.Launcher. Like Client, its methods may be called
// from several goroutines and are served one at a time, except Abort.
//
// The handshake is PMI-1's init line asking for version 2, then
// length-prefixed messages (see wire2.go):
//
//	cmd=init pmi_version=2 pmi_subversion=0\n  -> cmd=response_to_init ... rc=0\n
//	cmd=fullinit;pmijobid=J;pmirank=R;threaded=FALSE;
//	                                     -> cmd=fullinit-response;rc=0;rank=R;size=N;appnum=A;...
//	cmd=job-getid;                       -> cmd=job-getid-response;rc=0;jobid=J;
//	cmd=kvs-put;key=k;value=v;           -> cmd=kvs-put-response;rc=0;
//	cmd=kvs-fence;                       -> cmd=kvs-fence-response;rc=0; (once every rank is in)
//	cmd=kvs-get;jobid=J;srcid=-1;key=k;  -> cmd=kvs-get-response;rc=0;found=TRUE;value=v;
//	cmd=finalize;                        -> cmd=finalize-response;rc=0;
//	cmd=abort;isworld=TRUE;exitcode=N;msg=...;  (no reply: the job is killed)
//
// Slurm requires pmijobid, pmirank and threaded in fullinit (MPICH's hydra
// reads pmirank only) and ignores kvs-get's jobid and srcid.
type Client2 struct {
	rank, size, appnum int
	jobid              string
	name               string

	mu   sync.Mutex // one request and its reply at a time
	r    *bufio.Reader
	wmu  sync.Mutex // writes, so that Abort can interrupt a waiting Fence
	conn net.Conn
	done bool

	tree treeHook // where UseTree set one
	ledger
}

var _ bootstrap.Launcher = (*Client2)(nil)

// newClient2 runs the PMI-2 handshake on conn. id is the rank's PMI id
// (PMI_RANK, or PMI_ID where the server gave one) and pmiJobID Slurm's
// PMI_JOBID (empty elsewhere).
func newClient2(conn net.Conn, r *bufio.Reader, id, pmiJobID, name string) (*Client2, error) {
	c := &Client2{conn: conn, r: r, name: name}
	if _, err := conn.Write(formatLine("init", "pmi_version", "2", "pmi_subversion", "0")); err != nil {
		return nil, fmt.Errorf("pmi: sending PMI-2 init: %w", err)
	}
	m, err := readMessage(r)
	if err != nil {
		return nil, fmt.Errorf("pmi: waiting for the reply to PMI-2 init: %w", err)
	}
	if m.cmd != "response_to_init" {
		return nil, fmt.Errorf("pmi: server answered PMI-2 init with cmd=%s", m.cmd)
	}
	if rc := m.args["rc"]; rc != "0" || m.args["pmi_version"] != "2" {
		return nil, fmt.Errorf("pmi: the launcher does not speak PMI-2: it answered init with rc=%s pmi_version=%s (gocollrun and other PMI-1 servers do this; set GOCOLL_PMI=1)",
			rc, m.args["pmi_version"])
	}
	kv := []string{}
	if pmiJobID != "" {
		kv = append(kv, "pmijobid", pmiJobID)
	}
	kv = append(kv, "pmirank", id, "threaded", "FALSE")
	if m, err = c.call("fullinit-response", "fullinit", kv...); err != nil {
		return nil, err
	}
	if err := resultErr2(m, "fullinit"); err != nil {
		return nil, err
	}
	rank, err1 := intArg(m, "rank")
	size, err2 := intArg(m, "size")
	appnum, err3 := intArg(m, "appnum")
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	if err := checkRank(rank, size); err != nil {
		return nil, err
	}
	// Slurm sends appnum=-1: it does not know MPMD application numbers.
	c.rank, c.size, c.appnum = rank, size, max(appnum, 0)
	if m, err = c.call("job-getid-response", "job-getid"); err != nil {
		return nil, err
	}
	if err := resultErr2(m, "job-getid"); err != nil {
		return nil, err
	}
	if c.jobid = m.args["jobid"]; c.jobid == "" {
		return nil, errors.New("pmi: PMI-2 server sent an empty jobid")
	}
	c.traffic.Other = 3
	return c, nil
}

// Rank is this process's rank in the job, 0 <= Rank < Size.
func (c *Client2) Rank() int { return c.rank }

// Size is the number of ranks in the job.
func (c *Client2) Size() int { return c.size }

// AppNum is the application number in an MPMD launch (0 otherwise).
func (c *Client2) AppNum() int { return c.appnum }

// JobID is the job's PMI-2 id (the name of its key-value space).
func (c *Client2) JobID() string { return c.jobid }

// MaxValueLen is the longest value Put accepts: PMI2_MAX_VALLEN-1.
func (c *Client2) MaxValueLen() int { return vallenMax2 - 1 }

// Put stores value under key, visible to every rank after the next Fence.
// Keys are at most 63 bytes and values 1023, printable ASCII without
// spaces, ';' or '\\'; a key also without '='.
func (c *Client2) Put(key, value string) error {
	if err := errors.Join(checkToken2("key", key, keylenMax2-1), checkToken2("value", value, vallenMax2-1)); err != nil {
		return err
	}
	m, err := c.call("kvs-put-response", "kvs-put", "key", key, "value", value)
	if err != nil {
		return err
	}
	c.count(func(t *bootstrap.Traffic) { t.Puts++; t.Bytes += len(key) + len(value) })
	return resultErr2(m, "kvs-put "+key)
}

// Fence is a barrier over all ranks of the job; Puts made before it are
// then visible to every rank. There is no timeout: if a rank never
// arrives, the launcher is expected to end the job.
func (c *Client2) Fence() error {
	m, err := c.call("kvs-fence-response", "kvs-fence")
	c.count(func(t *bootstrap.Traffic) { t.Fences++ })
	if err != nil {
		return err
	}
	return resultErr2(m, "kvs-fence")
}

// Get returns the value stored under key by any rank before the last
// Fence, or an error if there is none.
func (c *Client2) Get(key string) (string, error) {
	if err := checkToken2("key", key, keylenMax2-1); err != nil {
		return "", err
	}
	m, err := c.call("kvs-get-response", "kvs-get", "jobid", c.jobid, "srcid", "-1", "key", key)
	if err != nil {
		return "", err
	}
	if err := resultErr2(m, "kvs-get "+key); err != nil {
		return "", err
	}
	if m.args["found"] != "TRUE" {
		return "", fmt.Errorf("pmi: kvs-get %s: not found", key)
	}
	v := m.args["value"]
	c.count(func(t *bootstrap.Traffic) { t.Gets++; t.Bytes += len(key) + len(v) })
	return v, nil
}

// Allgather is bootstrap.KVSAllgather: one put (more only for blobs over
// 1 KiB), one fence and one get per rank; PMI-2 has no bulk get. Where
// UseTree set one, it is bootstrap.Tree's: one put (rank 0's), one fence
// and one get (the other ranks') in all, whatever the number of calls.
func (c *Client2) Allgather(mine []byte) ([][]byte, error) {
	gen := c.nextGen()
	if t := c.tree.get(); t != nil {
		return t.Allgather(mine)
	}
	return bootstrap.KVSAllgather(c, gen, c.MaxValueLen(), mine)
}

// Name says "PMI-2", with the launcher where the environment tells it.
func (c *Client2) Name() string { return c.name }

// Finalize tells the server this rank is done with PMI and closes the
// connection.
func (c *Client2) Finalize() error {
	c.tree.end()
	m, err := c.call("finalize-response", "finalize")
	if errors.Is(err, errFinalized) {
		return err
	}
	if err == nil {
		err = resultErr2(m, "finalize")
	}
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	return errors.Join(err, c.conn.Close())
}

// Abort asks the launcher to end the whole job. Slurm kills the step (its
// tasks then end by signal, not with code) and shows no message, so a
// non-empty msg is also written to standard error here. Abort returns
// once the request is sent; a caller that gets control back should exit
// with code.
func (c *Client2) Abort(code int, msg string) error {
	if msg != "" {
		fmt.Fprintf(os.Stderr, "pmi: rank %d aborts the job with code %d: %s\n", c.rank, code, msg)
	}
	// The message travels as one value: no ';', spaces kept out too.
	wire := strings.Map(func(r rune) rune {
		if r == ';' || r == '\\' || r <= ' ' || r >= 0x7f {
			return '_'
		}
		return r
	}, msg)
	b, err := formatV2("abort", "isworld", "TRUE", "exitcode", strconv.Itoa(code), "msg", wire)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.conn.Write(b)
	return err
}

// call sends one PMI-2 command and reads the reply, which must be the
// command want; a reply with rc != 0 is returned without error for the
// caller to name (resultErr2).
func (c *Client2) call(want, cmd string, kv ...string) (message, error) {
	b, err := formatV2(cmd, kv...)
	if err != nil {
		return message{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return message{}, fmt.Errorf("pmi: %s: %w", cmd, errFinalized)
	}
	c.wmu.Lock()
	_, err = c.conn.Write(b)
	c.wmu.Unlock()
	if err != nil {
		return message{}, fmt.Errorf("pmi: sending %s: %w", cmd, err)
	}
	m, err := readV2(c.r)
	if err != nil {
		return m, fmt.Errorf("pmi: waiting for the reply to %s: %w", cmd, err)
	}
	if m.cmd != want {
		return m, fmt.Errorf("pmi: server answered %s with cmd=%s (%v), want cmd=%s", cmd, m.cmd, m.args, want)
	}
	return m, nil
}

// resultErr2 turns a PMI-2 reply's rc and errmsg into an error.
func resultErr2(m message, what string) error {
	if rc, ok := m.args["rc"]; ok && rc != "0" {
		return fmt.Errorf("pmi: %s: PMI-2 server returned rc=%s (%s)", what, rc, m.args["errmsg"])
	}
	return nil
}
