package pmi

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Server is the PMI-1 server of one job of Size ranks: one key-value
// space, a barrier over all ranks, abort and finalize. The launcher hands
// it each rank's connection (ServeConn, for an inherited socket) or a
// listener (Serve, for ranks that dial PMI_PORT and name themselves with
// initack), tells it when a rank's process ends (Exited), and reads what
// needs its attention from Events.
//
// Unlike hydra, a Put is visible to Gets at once, not only after the
// next barrier, and a value or key longer than the announced maxes is
// refused rather than truncated.
type Server struct {
	size    int
	kvsname string
	events  chan Event

	portIDs map[string]int // PMI_ID -> rank, for Serve
	idOf    []string       // rank -> PMI_ID

	mu        sync.Mutex
	kv        map[string]string
	kvVersion int // counts puts: bulk is valid while it is unchanged
	bulk      map[string]bulkReply
	ranks     []rankState
	barrier   []*serverConn // waiting in the current barrier, by arrival
	stuckSent bool
	conns     map[*serverConn]bool
	listeners []net.Listener
	closed    bool
}

// bulkReply is a gocoll_getranks reply, made once per prefix and kept
// until the next put: every rank asks for the same one after a fence.
type bulkReply struct {
	version int
	line    []byte
}

// rankState is what the server knows of one rank.
type rankState struct {
	conn                                 *serverConn // nil until a connection serves the rank
	inited, finalized, exited, inBarrier bool
}

// NewServer returns the server of a job of size ranks whose key-value
// space is called kvsname (printable ASCII, no spaces, under 256 bytes).
func NewServer(size int, kvsname string) *Server {
	s := &Server{
		size:    size,
		kvsname: kvsname,
		events:  make(chan Event, 4*size+16),
		portIDs: map[string]int{},
		kv:      map[string]string{},
		ranks:   make([]rankState, size),
		conns:   map[*serverConn]bool{},
	}
	for r := range size {
		for {
			// MPICH's client reads PMI_ID with atoi: a positive int32.
			id := strconv.FormatUint(uint64(rand.Uint32()>>1), 10)
			if _, taken := s.portIDs[id]; !taken && id != "0" {
				s.portIDs[id] = r
				s.idOf = append(s.idOf, id)
				break
			}
		}
	}
	return s
}

// PortID is the PMI_ID to give rank when it is to dial PMI_PORT: a random
// number, so that a process that was not given it cannot connect as the
// rank (hydra uses the rank itself).
func (s *Server) PortID(rank int) string {
	if rank < 0 || rank >= s.size {
		return ""
	}
	return s.idOf[rank]
}

// Exited tells the server that rank's process has ended. A barrier that
// rank has not entered can then never complete, and Events says so.
func (s *Server) Exited(rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rank < 0 || rank >= s.size {
		return
	}
	s.ranks[rank].exited = true
	s.checkStuck()
}

// Initialized reports whether rank has sent init.
func (s *Server) Initialized(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rank >= 0 && rank < s.size && s.ranks[rank].inited
}

// Finalized reports whether rank has sent finalize.
func (s *Server) Finalized(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rank >= 0 && rank < s.size && s.ranks[rank].finalized
}

// Close closes every connection and listener; ranks still waiting for a
// reply see their connection end.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns, ls := s.conns, s.listeners
	s.conns, s.listeners = map[*serverConn]bool{}, nil
	s.mu.Unlock()
	for sc := range conns {
		sc.c.Close()
	}
	for _, l := range ls {
		l.Close()
	}
}
