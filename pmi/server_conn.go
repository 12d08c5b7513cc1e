package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// serverConn is one rank's connection.
type serverConn struct {
	c    net.Conn
	rank int
	wmu  sync.Mutex
}

// send writes one reply line.
func (sc *serverConn) send(cmd string, kv ...string) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	_, err := sc.c.Write(formatLine(cmd, kv...))
	return err
}

// write writes a reply line made elsewhere.
func (sc *serverConn) write(line []byte) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	_, err := sc.c.Write(line)
	return err
}

// ServeConn serves rank's connection until it ends; for connections
// whose rank is known, such as one end of a socketpair passed as PMI_FD.
// It returns nil when the connection ends after finalize.
func (s *Server) ServeConn(c net.Conn, rank int) error {
	sc := &serverConn{c: c, rank: rank}
	if err := s.claim(sc); err != nil {
		c.Close()
		return err
	}
	return s.serve(sc, bufio.NewReaderSize(c, maxLine))
}

// Serve accepts connections on l until it is closed (by Close or the
// caller). Each connection must first identify its rank with
// "cmd=initack pmiid=<PortID(rank)>", which is answered, as hydra does,
// with cmd=initack and "cmd=set" lines for size, rank and debug.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("pmi: server closed")
	}
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.serveInitack(c)
	}
}

// serveInitack reads a PMI_PORT connection's initack, then serves it.
func (s *Server) serveInitack(c net.Conn) {
	r := bufio.NewReaderSize(c, maxLine)
	m, err := readMessage(r)
	if err != nil {
		s.event(Event{Kind: ProtocolError, Rank: -1, Msg: fmt.Sprintf("connection from %s: %v", c.RemoteAddr(), err)})
		c.Close()
		return
	}
	rank, ok := s.portIDs[m.args["pmiid"]]
	if m.cmd != "initack" || !ok {
		s.event(Event{Kind: ProtocolError, Rank: -1, Msg: fmt.Sprintf("connection from %s began with cmd=%s %v, not initack with a PMI_ID of this job", c.RemoteAddr(), m.cmd, m.args)})
		c.Close()
		return
	}
	sc := &serverConn{c: c, rank: rank}
	if err := s.claim(sc); err != nil {
		s.event(Event{Kind: ProtocolError, Rank: -1, Msg: fmt.Sprintf("connection from %s: %v", c.RemoteAddr(), err)})
		c.Close()
		return
	}
	sc.wmu.Lock()
	_, err = c.Write([]byte(fmt.Sprintf("cmd=initack\ncmd=set size=%d\ncmd=set rank=%d\ncmd=set debug=0\n", s.size, rank)))
	sc.wmu.Unlock()
	if err == nil {
		s.serve(sc, r)
	}
}

// claim makes sc the connection of its rank; each rank has one.
func (s *Server) claim(sc *serverConn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("pmi: server closed")
	case sc.rank < 0 || sc.rank >= s.size:
		return fmt.Errorf("pmi: rank %d out of range for a job of %d", sc.rank, s.size)
	case s.ranks[sc.rank].conn != nil:
		return fmt.Errorf("pmi: rank %d already has a connection", sc.rank)
	}
	s.ranks[sc.rank].conn = sc
	s.conns[sc] = true
	return nil
}

// serve reads and answers sc's commands until the connection ends.
func (s *Server) serve(sc *serverConn, r *bufio.Reader) error {
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		sc.c.Close()
	}()
	for {
		m, err := readMessage(r)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				if s.Finalized(sc.rank) {
					return nil
				}
				return fmt.Errorf("pmi: rank %d closed its connection without finalize", sc.rank)
			}
			s.event(Event{Kind: ProtocolError, Rank: sc.rank, Msg: err.Error()})
			return err
		}
		if err := s.handle(sc, m); err != nil {
			return err
		}
	}
}

// handle answers one command. An error ends the connection.
func (s *Server) handle(sc *serverConn, m message) error {
	a := m.args
	switch m.cmd {
	case "init":
		if a["pmi_version"] != "1" {
			return sc.send("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "-1")
		}
		s.mu.Lock()
		s.ranks[sc.rank].inited = true
		s.mu.Unlock()
		return sc.send("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "0")
	case "get_maxes":
		return sc.send("maxes", "kvsname_max", strconv.Itoa(kvsnameMax),
			"keylen_max", strconv.Itoa(keylenMax), "vallen_max", strconv.Itoa(vallenMax),
			"gocoll_getranks", "1")
	case "get_appnum":
		return sc.send("appnum", "appnum", "0")
	case "get_my_kvsname":
		return sc.send("my_kvsname", "kvsname", s.kvsname)
	case "get_universe_size":
		return sc.send("universe_size", "size", strconv.Itoa(s.size))
	case "put":
		return sc.send("put_result", s.put(a)...)
	case "get":
		return sc.send("get_result", s.get(a)...)
	case "gocoll_getranks":
		return sc.write(s.getRanks(a))
	case "barrier_in":
		return s.barrierIn(sc)
	case "finalize":
		s.mu.Lock()
		s.ranks[sc.rank].finalized = true
		s.mu.Unlock()
		return sc.send("finalize_ack")
	case "abort":
		code, err := strconv.Atoi(a["exitcode"])
		if err != nil {
			code = 1
		}
		s.event(Event{Kind: Abort, Rank: sc.rank, Code: code})
		return nil
	}
	s.event(Event{Kind: ProtocolError, Rank: sc.rank, Msg: "unknown command cmd=" + m.cmd})
	return sc.send(m.cmd+"_result", "rc", "-1", "msg", "unknown_command")
}
