package pmi

import (
	"bytes"
	"fmt"
	"strconv"
)

// put stores a key and returns put_result's arguments.
func (s *Server) put(a map[string]string) []string {
	key, value := a["key"], a["value"]
	_, hasValue := a["value"]
	switch {
	case a["kvsname"] != s.kvsname:
		return failure("unknown_kvsname")
	case key == "" || !hasValue:
		return failure("put_needs_key_and_value")
	case len(key) > keylenMax-1:
		return failure("key_too_long")
	case len(value) > vallenMax-1:
		return failure("value_too_long")
	}
	s.mu.Lock()
	s.kv[key] = value
	s.kvVersion++
	s.mu.Unlock()
	return []string{"rc", "0", "msg", "success"}
}

// get looks a key up and returns get_result's arguments.
func (s *Server) get(a map[string]string) []string {
	if a["kvsname"] != s.kvsname {
		return append(failure("unknown_kvsname"), "value", "unknown")
	}
	s.mu.Lock()
	v, ok := s.kv[a["key"]]
	s.mu.Unlock()
	if !ok {
		return append(failure("key_"+a["key"]+"_not_found"), "value", "unknown")
	}
	return []string{"rc", "0", "msg", "success", "value", v}
}

// getRanks answers gocoll_getranks: prefix+r for every rank r, in one
// line (cmd=gocoll_ranks rc=0 msg=success v0=... v1=...), so that a rank
// fetches every peer's start-up card in one round trip. The line is made
// once per prefix and put.
func (s *Server) getRanks(a map[string]string) []byte {
	if a["kvsname"] != s.kvsname {
		return formatLine("gocoll_ranks", failure("unknown_kvsname")...)
	}
	prefix := a["prefix"]
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.bulk[prefix]; ok && r.version == s.kvVersion {
		return r.line
	}
	var b bytes.Buffer
	b.WriteString("cmd=gocoll_ranks rc=0 msg=success")
	for r := range s.size {
		key := prefix + strconv.Itoa(r)
		v, ok := s.kv[key]
		if !ok {
			return formatLine("gocoll_ranks", failure("key_"+key+"_not_found")...)
		}
		fmt.Fprintf(&b, " v%d=%s", r, v)
	}
	b.WriteByte('\n')
	if s.bulk == nil {
		s.bulk = map[string]bulkReply{}
	}
	s.bulk[prefix] = bulkReply{s.kvVersion, b.Bytes()}
	return b.Bytes()
}

// failure is a reply's arguments for an error.
func failure(msg string) []string { return []string{"rc", "-1", "msg", msg} }

// barrierIn enters sc's rank into the barrier; the last rank in releases
// them all.
func (s *Server) barrierIn(sc *serverConn) error {
	s.mu.Lock()
	st := &s.ranks[sc.rank]
	if st.inBarrier {
		s.mu.Unlock()
		s.event(Event{Kind: ProtocolError, Rank: sc.rank, Msg: "barrier_in while already in the barrier"})
		return nil
	}
	st.inBarrier = true
	s.barrier = append(s.barrier, sc)
	if len(s.barrier) < s.size {
		s.checkStuck()
		s.mu.Unlock()
		return nil
	}
	out := s.barrier
	s.barrier = nil
	for i := range s.ranks {
		s.ranks[i].inBarrier = false
	}
	s.mu.Unlock()
	for _, w := range out {
		// A rank that died inside the barrier cannot be told; the others
		// still go on.
		w.send("barrier_out")
	}
	return nil
}

// checkStuck reports a barrier that a rank whose process has ended has
// not entered. Called with s.mu held.
func (s *Server) checkStuck() {
	if s.stuckSent || len(s.barrier) == 0 {
		return
	}
	for r, st := range s.ranks {
		if st.exited && !st.inBarrier {
			s.stuckSent = true
			s.event(Event{Kind: Stuck, Rank: s.barrier[0].rank, Other: r})
			return
		}
	}
}
