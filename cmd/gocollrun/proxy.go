package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proxyHandshakeTimeout bounds the proxy's dial and handshake.
const proxyHandshakeTimeout = 30 * time.Second

// proxy is gocollrun --proxy ADDR INDEX, started by gocollrun on a
// remote host through the launcher: it starts that host's ranks, relays
// their PMI connections and output to gocollrun over one connection,
// reports their exits, signals them when told, and kills them when the
// connection drops, so that no rank outlives its job.
type proxy struct {
	fc     *frameConn
	spec   proxySpec
	secret string
	out    *output // only its line splitting: writes go to frames

	bulk bulkCache // bulk gets, fetched once for all ranks here

	mu    sync.Mutex
	ranks map[uint32]*proxyRank
	// stopSig is the last signal gocollrun sent: the job is ending, so
	// ranks not started yet are not started, and one that was starting
	// gets it at once.
	stopSig syscall.Signal
}

// proxyRank is one rank the proxy started.
type proxyRank struct {
	id     int
	cmd    *exec.Cmd
	pmi    net.Conn       // the proxy's end of the rank's PMI socketpair
	copies sync.WaitGroup // the output copiers
	exited bool           // under proxy.mu
	// bulk is the bulk get this rank sent on to gocollrun, whose reply
	// (the next line, collected in reply) the cache keeps; under
	// proxy.mu.
	bulk  *bulkEntry
	reply []byte
}

// runProxy runs the proxy and returns its exit status: 0 when every rank
// has ended and been reported, 1 when the connection to gocollrun failed.
// The job secret comes as the first line of standard input, never on the
// command line.
func runProxy(args []string) int {
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "gocollrun --proxy on %s: "+format+"\n", append([]any{hostname()}, a...)...)
	}
	if len(args) != 2 {
		logf("want --proxy ADDR INDEX (gocollrun starts its proxies itself)")
		return exitUsage
	}
	index, err := strconv.ParseUint(args[1], 10, 32)
	if err != nil {
		logf("host index %q: %v", args[1], err)
		return exitUsage
	}
	secret, err := bufio.NewReaderSize(os.Stdin, 256).ReadString('\n')
	secret = strings.TrimSpace(secret)
	if secret == "" {
		logf("no job secret on standard input (%v)", err)
		return exitUsage
	}
	p, err := dialProxy(args[0], uint32(index), secret)
	if err != nil {
		logf("%v", err)
		return 1
	}
	if !p.run() {
		logf("lost the connection to gocollrun at %s; killed the ranks", args[0])
		return 1
	}
	return 0
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// dialProxy connects to gocollrun, proves it knows the secret and reads
// what to run.
func dialProxy(addr string, index uint32, secret string) (*proxy, error) {
	c, err := net.DialTimeout("tcp", addr, proxyHandshakeTimeout)
	if err != nil {
		return nil, fmt.Errorf("connecting to gocollrun: %w", err)
	}
	c.SetDeadline(time.Now().Add(proxyHandshakeTimeout))
	fc := newFrameConn(c)
	p := &proxy{fc: fc, secret: secret, ranks: map[uint32]*proxyRank{}}
	err = func() error {
		if err := fc.send(frameHello, index, []byte(proxyMagic)); err != nil {
			return err
		}
		kind, _, nonce, err := fc.recv()
		if err != nil {
			return fmt.Errorf("%w (not gocollrun, or another version?)", err)
		}
		if kind != frameNonce {
			return fmt.Errorf("frame kind %d, want the nonce", kind)
		}
		if err := fc.send(frameAuth, index, helloMAC(secret, nonce, index)); err != nil {
			return err
		}
		kind, _, spec, err := fc.recv()
		if err != nil {
			return fmt.Errorf("%w (a wrong job secret?)", err)
		}
		if kind != frameSpec {
			return fmt.Errorf("frame kind %d, want the spec", kind)
		}
		if err := json.Unmarshal(spec, &p.spec); err != nil {
			return fmt.Errorf("spec: %w", err)
		}
		if len(p.spec.Prog) == 0 {
			return errors.New("spec: no program")
		}
		return nil
	}()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("handshake with gocollrun at %s: %w", addr, err)
	}
	c.SetDeadline(time.Time{})
	p.out = newOutput(p.spec.Tag)
	return p, nil
}

// run starts the ranks and serves them until all have ended (true) or
// the connection to gocollrun drops (false, after killing the ranks).
func (p *proxy) run() bool {
	// Ranks get SIGKILL when the thread that started them ends.
	runtime.LockOSThread()
	if p.spec.Dir != "" {
		os.Chdir(p.spec.Dir) // where it exists, as ssh users expect
	}
	base := mergeEnv(os.Environ(), p.spec.Env)
	dropped := make(chan struct{})
	go func() {
		p.serve()
		close(dropped)
	}()
	ended := make(chan struct{}, len(p.spec.Ranks))
	started := 0
	for i, id := range p.spec.Ranks {
		p.mu.Lock()
		ending := p.stopSig != 0
		p.mu.Unlock()
		var pr *proxyRank
		err := errors.New("not started: the job is ending")
		if !ending {
			pr, err = p.startRank(id, base)
		}
		if err != nil {
			why := 'x'
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
				why = 'n'
			}
			// This rank, and those after it that will not start.
			for k, rest := range p.spec.Ranks[i:] {
				msg := err.Error()
				if k > 0 {
					msg = fmt.Sprintf("not started, as rank %d was not", id)
				}
				p.fc.send(frameStartFailed, uint32(rest), append([]byte{byte(why)}, msg...))
			}
			break
		}
		started++
		go p.watch(pr, ended)
	}
	for done := 0; done < started; {
		select {
		case <-ended:
			done++
		case <-dropped:
			p.signalAll(syscall.SIGKILL)
			return false
		}
	}
	p.removeShm()
	if fetched, served := p.bulk.counts(); p.spec.Verbose && fetched+served > 0 {
		fmt.Fprintf(os.Stderr, "gocollrun: proxy on %s: %d bulk gets of its ranks went to gocollrun, %d were answered here\n",
			p.spec.Host, fetched, served)
	}
	p.fc.c.Close()
	return true
}

// startRank starts one rank, with its PMI connection on an inherited
// socket relayed to gocollrun.
func (p *proxy) startRank(id int, base []string) (*proxyRank, error) {
	vars := map[string]string{
		"PMI_RANK":          strconv.Itoa(id),
		"PMI_SIZE":          strconv.Itoa(p.spec.Size),
		"PMI_FD":            "3", // ExtraFiles[0]
		"GOCOLL_JOB_ID":     p.spec.JobID,
		"GOCOLL_JOB_SECRET": p.secret,
		"GOCOLL_HOST":       p.spec.Host,
		"GOCOLL_NUM_HOSTS":  strconv.Itoa(p.spec.Hosts),
	}
	// Ranks that dialed gocollrun's PMI port listened on the address
	// that routes to it (job's tcpAddr); through the proxy they no longer
	// see that port, so the proxy names the address, unless the user did.
	if a, ok := p.fc.c.LocalAddr().(*net.TCPAddr); ok && !slices.ContainsFunc(base, func(kv string) bool {
		return strings.HasPrefix(kv, "GOCOLL_TCP_ADDR=")
	}) {
		vars["GOCOLL_TCP_ADDR"] = a.IP.String()
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	parent := os.NewFile(uintptr(fds[0]), "pmi")
	conn, err := net.FileConn(parent)
	parent.Close()
	child := os.NewFile(uintptr(fds[1]), "pmi-child")
	defer child.Close()
	if err != nil {
		return nil, err
	}
	pr := &proxyRank{id: id, pmi: conn}
	cmd := exec.Command(p.spec.Prog[0], p.spec.Prog[1:]...)
	cmd.ExtraFiles = []*os.File{child}
	cmd.Env = rankEnv(base, vars)
	cmd.SysProcAttr = procAttr()
	stdout, err := p.pipe(pr, frameStdout)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer stdout.Close()
	stderr, err := p.pipe(pr, frameStderr)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, err
	}
	pr.cmd = cmd
	p.mu.Lock()
	p.ranks[uint32(id)] = pr
	if p.stopSig != 0 {
		syscall.Kill(-cmd.Process.Pid, p.stopSig)
	}
	p.mu.Unlock()
	p.fc.send(frameStarted, uint32(id), []byte(strconv.Itoa(cmd.Process.Pid)))
	go p.relayPMI(pr)
	return pr, nil
}

// pipe returns the write end to give the rank as stdout or stderr, and
// starts sending what arrives to gocollrun, a whole line per frame.
func (p *proxy) pipe(pr *proxyRank, kind frameKind) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	prefix := ""
	if p.spec.Tag {
		prefix = fmt.Sprintf("[%d] ", pr.id)
	}
	pr.copies.Add(1)
	go func() {
		defer pr.copies.Done()
		defer r.Close()
		p.out.copyLines(r, frameWriter{p.fc, kind, uint32(pr.id)}, prefix)
	}()
	return w, nil
}

// relayPMI forwards what the rank writes on its PMI socket to gocollrun,
// a line at a time, except bulk gets that another rank of this host has
// already asked for: those the cache answers.
func (p *proxy) relayPMI(pr *proxyRank) {
	r := bufio.NewReaderSize(pr.pmi, 32<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			e, forward := p.bulk.request(line)
			if forward {
				if e != nil {
					p.mu.Lock()
					pr.bulk = e
					p.mu.Unlock()
				}
				if p.fc.send(framePMI, uint32(pr.id), line) != nil {
					return
				}
			} else {
				go func() {
					<-e.done
					pr.pmi.Write(e.line)
				}()
			}
		}
		if err != nil {
			p.fc.send(framePMIEnd, uint32(pr.id), nil)
			return
		}
	}
}

// fromServer passes gocollrun's PMI bytes for pr on to it, keeping the
// reply to its bulk get for the cache.
func (p *proxy) fromServer(pr *proxyRank, b []byte) {
	p.mu.Lock()
	e := pr.bulk
	if e != nil {
		pr.reply = append(pr.reply, b...)
		i := bytes.IndexByte(pr.reply, '\n')
		if i < 0 {
			p.mu.Unlock()
			return
		}
		b = pr.reply
		pr.bulk, pr.reply = nil, nil
		p.bulk.reply(e, bytes.Clone(b[:i+1]))
	}
	p.mu.Unlock()
	pr.pmi.Write(b)
}

// watch waits for the rank, lets its output drain, and reports its end.
func (p *proxy) watch(pr *proxyRank, ended chan<- struct{}) {
	err := pr.cmd.Wait()
	drained := make(chan struct{})
	go func() { pr.copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputGrace): // a daemon of the rank holds its output
	}
	p.mu.Lock()
	pr.exited = true
	p.mu.Unlock()
	if ps := pr.cmd.ProcessState; ps != nil {
		p.fc.send(frameExit, uint32(pr.id), exitPayload(statusOf(ps)))
	} else {
		p.fc.send(frameStartFailed, uint32(pr.id), []byte(fmt.Sprintf("xwaiting for it: %v", err)))
	}
	ended <- struct{}{}
}

// serve acts on gocollrun's frames until the connection ends.
func (p *proxy) serve() {
	for {
		kind, id, payload, err := p.fc.recv()
		if err != nil {
			return
		}
		switch kind {
		case framePMI:
			p.mu.Lock()
			pr := p.ranks[id]
			p.mu.Unlock()
			if pr != nil {
				p.fromServer(pr, payload)
			}
		case frameSignal:
			if len(payload) != 1 {
				continue
			}
			sig := syscall.Signal(payload[0])
			p.mu.Lock()
			p.stopSig = sig
			if pr := p.ranks[id]; pr != nil && !pr.exited {
				syscall.Kill(-pr.cmd.Process.Pid, sig)
			}
			p.mu.Unlock()
		}
	}
}

// signalAll sends sig to the process group of every rank still running.
func (p *proxy) signalAll(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.ranks {
		if !pr.exited {
			syscall.Kill(-pr.cmd.Process.Pid, sig)
		}
	}
}

// jobIDPattern is what gocollrun's job ids look like; anything else is
// not globbed for.
var jobIDPattern = regexp.MustCompile(`^[0-9a-f]{1,64}$`)

// removeShm deletes the job's shared-memory segments on this host, as
// gocollrun does on its own.
func (p *proxy) removeShm() {
	if !jobIDPattern.MatchString(p.spec.JobID) {
		return
	}
	names, _ := filepath.Glob(filepath.Join(shmDir, "gocoll-"+p.spec.JobID+"-*"))
	for _, name := range names {
		os.Remove(name)
	}
}

// frameWriter sends each Write as one frame of kind about rank.
type frameWriter struct {
	fc   *frameConn
	kind frameKind
	rank uint32
}

func (w frameWriter) Write(b []byte) (int, error) {
	if err := w.fc.send(w.kind, w.rank, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// mergeEnv is own with every variable of over set over it: the ranks get
// gocollrun's environment, plus what the launcher or the remote login
// adds (host-specific variables were left out of over).
func mergeEnv(own, over []string) []string {
	set := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(own)+len(over))
	for _, kv := range own {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}
