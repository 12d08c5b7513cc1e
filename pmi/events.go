package pmi

import "strconv"

// EventKind says what an Event reports.
type EventKind int

const (
	// Abort: Rank called abort with exit status Code. The server does not
	// answer; the launcher is expected to kill the job.
	Abort EventKind = iota + 1
	// Stuck: Rank waits in a barrier that rank Other, whose process has
	// ended, can never enter. Reported once per server.
	Stuck
	// ProtocolError: Rank sent something the server cannot serve; Msg
	// says what. The server answers with an error reply, or closes the
	// connection when it cannot tell which rank is talking.
	ProtocolError
)

func (k EventKind) String() string {
	switch k {
	case Abort:
		return "abort"
	case Stuck:
		return "stuck"
	case ProtocolError:
		return "protocol error"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is something the launcher must act on. Rank is -1 when unknown.
type Event struct {
	Kind  EventKind
	Rank  int
	Code  int    // Abort: the exit status asked for
	Other int    // Stuck: the rank that ended
	Msg   string // ProtocolError: what went wrong
}

// Events delivers what the launcher must act on. It is buffered; events
// that find it full are dropped, so read it for the life of the job.
func (s *Server) Events() <-chan Event { return s.events }

// event hands e to the launcher without ever blocking the server.
func (s *Server) event(e Event) {
	select {
	case s.events <- e:
	default:
	}
}
