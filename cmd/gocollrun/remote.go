package main

import (
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proxyConnectTimeout is how long a started launcher has for its proxy
// to connect back (ssh may have to set up a connection first).
const proxyConnectTimeout = 60 * time.Second

// hostProxy is gocollrun's side of one remote host: the launcher process
// that runs the host's proxy and, once the proxy has connected and proved
// it knows the job secret, the connection to it.
type hostProxy struct {
	index int
	host  string
	ranks []*rank
	cmd   *exec.Cmd
	conns chan *frameConn // the authenticated connection, once

	mu      sync.Mutex
	fc      *frameConn
	stopped bool // signalled before its proxy connected: start nothing
}

// groupHosts makes a hostProxy for every remote host, in the order of
// their first ranks.
func (j *job) groupHosts() {
	byName := map[string]*hostProxy{}
	for _, r := range j.ranks {
		if r.local {
			continue
		}
		h := byName[r.host]
		if h == nil {
			h = &hostProxy{index: len(j.hosts), host: r.host, conns: make(chan *frameConn, 1)}
			byName[r.host] = h
			j.hosts = append(j.hosts, h)
		}
		h.ranks = append(h.ranks, r)
		r.proxy = h
	}
}

// startHosts starts every remote host's launcher, each running the proxy
// that dials addr: all at once, the proxies then start their ranks in
// parallel. It returns a non-zero exit status if a launcher could not be
// started (the hosts before it run).
func (j *job) startHosts(addr string, notices chan<- exitNotice) int {
	path := j.opts.proxyPath
	if path == "" {
		var err error
		if path, err = os.Executable(); err != nil {
			j.logf("cannot find gocollrun's own path for the proxies (give --proxy-path): %v", err)
			return exitNoStart
		}
	}
	for _, h := range j.hosts {
		argv, err := proxyArgv(j.opts.launcher, h.host, []string{path, "--proxy", addr, strconv.Itoa(h.index)})
		if err == nil {
			err = j.startLauncher(h, argv)
		}
		if err != nil {
			j.logf("cannot start the launcher for host %s (%s): %v", h.host, rankList(h.ranks), err)
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
				return exitNotFound
			}
			return exitNoStart
		}
		for _, r := range h.ranks {
			r.started = true
		}
		go j.serveHost(h, notices)
	}
	return 0
}

// startLauncher starts the launcher of h's proxy, the job secret on its
// standard input, its own output (the launcher's errors) on gocollrun's
// standard error.
func (j *job) startLauncher(h *hostProxy, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(j.secret + "\n")
	cmd.SysProcAttr = procAttr()
	cmd.WaitDelay = time.Second
	stderr, err := j.out.pipeTo(os.Stderr, "")
	if err != nil {
		return err
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	h.cmd = cmd
	return nil
}

// proxyArgv is the command line that starts the proxy on host through the
// launcher template: the template's words with %h replaced, then the
// proxy's words. ssh and rsh hand one string to the remote shell, so
// there the words are quoted for it.
func proxyArgv(template, host string, words []string) ([]string, error) {
	tw := strings.Fields(template)
	if len(tw) == 0 {
		return nil, errors.New("empty --launcher")
	}
	var argv []string
	for _, w := range tw {
		argv = append(argv, strings.ReplaceAll(w, "%h", host))
	}
	switch filepath.Base(tw[0]) {
	case "ssh", "rsh":
		for _, w := range words {
			argv = append(argv, shellQuote(w))
		}
		return argv, nil
	}
	return append(argv, words...), nil
}

// rankList names ranks for messages: "ranks 2, 3".
func rankList(rs []*rank) string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, strconv.Itoa(r.id))
	}
	if len(ids) == 1 {
		return "rank " + ids[0]
	}
	return "ranks " + strings.Join(ids, ", ")
}

// acceptProxies authenticates the proxies that connect to l and hands
// each connection to its host, until l is closed.
func (j *job) acceptProxies(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go j.handshake(c)
	}
}

// handshake checks that a connection comes from a proxy of this job
// that knows the job secret, and passes it to the proxy's host. Anything
// else is logged (as a connection to gocollrun's PMI port, which the
// proxies relay) and closed without a byte in reply.
func (j *job) handshake(c net.Conn) {
	c.SetDeadline(time.Now().Add(proxyHandshakeTimeout))
	fc := newFrameConn(c)
	nonce := []byte(randomHex(32))
	kind, index, hello, err := fc.recv()
	switch {
	case err != nil:
	case kind != frameHello || string(hello) != proxyMagic:
		err = errors.New("not a gocollrun proxy's hello")
	case int(index) >= len(j.hosts):
		err = fmt.Errorf("host index %d of %d", index, len(j.hosts))
	default:
		var mac []byte
		if err = fc.send(frameNonce, 0, nonce); err == nil {
			kind, _, mac, err = fc.recv()
		}
		if err == nil && (kind != frameAuth || !hmac.Equal(mac, helloMAC(j.secret, nonce, index))) {
			err = errors.New("the proxy does not know the job secret")
		}
	}
	if err != nil {
		j.logf("warning: a PMI connection: PMI protocol error: connection from %s: %v", c.RemoteAddr(), err)
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	select {
	case j.hosts[index].conns <- fc:
	default:
		j.logf("warning: a PMI connection: a second proxy for host %s, from %s; refused", j.hosts[index].host, c.RemoteAddr())
		c.Close()
	}
}

// serveHost serves h's proxy until it ends, then reports every rank of h
// whose end the proxy did not report.
func (j *job) serveHost(h *hostProxy, notices chan<- exitNotice) {
	waited := make(chan struct{})
	go func() {
		h.cmd.Wait()
		close(waited)
	}()
	reported := map[int]bool{}
	why := ""
	connect := time.NewTimer(proxyConnectTimeout)
	defer connect.Stop()
	select {
	case fc := <-h.conns:
		why = j.relay(h, fc, notices, reported)
	case <-waited:
	case <-connect.C:
		why = fmt.Sprintf("its proxy did not connect within %v", proxyConnectTimeout)
		syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-waited:
	case <-time.After(killGrace + outputGrace):
		// The proxy has ended or dropped its connection (and with it
		// its ranks); a launcher such as ssh may linger.
		syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	}
	if len(reported) == len(h.ranks) {
		return
	}
	code := 1
	if ps := h.cmd.ProcessState; ps != nil {
		st := statusOf(ps)
		if why == "" {
			why = fmt.Sprintf("the launcher of its proxy %s before the rank ended", st)
		}
		if c := st.exitCode(); c != 0 {
			code = c
		}
	}
	for _, r := range h.ranks {
		if !reported[r.id] {
			notices <- exitNotice{rank: r.id, why: why, code: code}
		}
	}
}

// relay sends h's proxy its ranks and relays their PMI connections,
// output and exits until the connection ends. It returns why the ranks
// it did not report were lost, or "".
func (j *job) relay(h *hostProxy, fc *frameConn, notices chan<- exitNotice, reported map[int]bool) string {
	defer fc.c.Close()
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if stopped {
		return "the job ended before its proxy connected"
	}

	// Each rank's PMI connection is a pipe to the server here, its bytes
	// carried in frames.
	pipes := map[uint32]net.Conn{}
	of := map[uint32]*rank{}
	spec := proxySpec{JobID: j.id, Host: h.host, Size: len(j.ranks), Prog: j.opts.prog, Tag: j.opts.tagOutput,
		Hosts: j.numHosts, Verbose: j.opts.verbose}
	for _, r := range h.ranks {
		ours, theirs := net.Pipe()
		go j.server.ServeConn(theirs, r.id)
		pipes[uint32(r.id)], of[uint32(r.id)] = ours, r
		go relayPMI(fc, ours, uint32(r.id))
		spec.Ranks = append(spec.Ranks, r.id)
	}
	defer func() {
		for _, p := range pipes {
			p.Close()
		}
	}()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !hostSpecific(k) && !strings.HasPrefix(k, "PMI_") && k != "GOCOLL_JOB_SECRET" {
			spec.Env = append(spec.Env, kv)
		}
	}
	spec.Dir, _ = os.Getwd()
	b, err := json.Marshal(spec)
	if err == nil {
		err = fc.send(frameSpec, 0, b)
	}
	if err != nil {
		return fmt.Sprintf("cannot send its proxy the job: %v", err)
	}
	// Signals go through the connection from now on, after the spec.
	h.mu.Lock()
	h.fc = fc
	h.mu.Unlock()
	for {
		kind, id, payload, err := fc.recv()
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			return fmt.Sprintf("the connection to its proxy failed: %v", err)
		}
		r := of[id]
		if r == nil {
			return fmt.Sprintf("its proxy sent a frame about rank %d, not one of host %s", id, h.host)
		}
		if (kind == frameExit || kind == frameStartFailed) && reported[r.id] {
			return fmt.Sprintf("its proxy reported the end of rank %d twice", r.id)
		}
		switch kind {
		case frameStarted:
			if pid, err := strconv.Atoi(string(payload)); err == nil {
				r.remotePid.Store(int64(pid))
			}
		case frameStdout:
			j.out.write(os.Stdout, payload)
		case frameStderr:
			j.out.write(os.Stderr, payload)
		case framePMI:
			pipes[id].Write(payload)
		case framePMIEnd:
			pipes[id].Close()
		case frameExit:
			s, err := parseExit(payload)
			if err != nil {
				return err.Error()
			}
			reported[r.id] = true
			notices <- exitNotice{rank: r.id, state: &s}
		case frameStartFailed:
			if len(payload) == 0 {
				return "its proxy sent an empty start failure"
			}
			code := exitNoStart
			if payload[0] == 'n' {
				code = exitNotFound
			}
			reported[r.id] = true
			notices <- exitNotice{rank: r.id, why: string(payload[1:]), code: code, noStart: true}
		default:
			return fmt.Sprintf("its proxy sent a frame of unknown kind %d", kind)
		}
	}
}

// relayPMI sends what the server writes on a rank's PMI pipe to the
// rank's proxy.
func relayPMI(fc *frameConn, pipe net.Conn, rank uint32) {
	buf := make([]byte, 32<<10)
	for {
		n, err := pipe.Read(buf)
		if n > 0 && fc.send(framePMI, rank, buf[:n]) != nil {
			return
		}
		if err != nil {
			return
		}
	}
}

// signal sends sig to a rank of h through its proxy; before the proxy
// has connected, it signals the launcher's process group instead and
// keeps the proxy from starting anything.
func (h *hostProxy) signal(rank int, sig syscall.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fc != nil {
		h.fc.send(frameSignal, uint32(rank), []byte{byte(sig)})
		return
	}
	h.stopped = true
	syscall.Kill(-h.cmd.Process.Pid, sig)
}
