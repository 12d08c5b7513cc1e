// Package route is one transport made of several, chosen per peer: shared
// memory to the ranks on this host and TCP to the others, say. The
// choice is made once, in New, by a function of the peer, as NCCL picks a
// transport per pair of ranks by trying each in order of preference.
//
// # Picking: the table
//
// Table (table.go) is how the standalone job (shm, tcp) and the preload
// (shm, hostmpi) pick: an ordered list of entries (name, reaches(peer),
// new), each peer going through the first entry that reaches it, one
// entry only where GOCOLL_TRANSPORT forces it. Only the entries some peer
// picks are built; a router joins them where there are several.
//
// # Splitting ops without moving them
//
// An op must stay at the same address from Start until Wait returns for
// it, and a transport takes a slice of ops, so the router cannot gather
// the ops for one transport into a slice of their own. It cuts the ops
// into runs instead: maximal stretches of consecutive ops whose peers use
// the same transport. Start starts each run on its transport, Wait waits
// on each run in order, and both find the runs again from the op slice
// itself and the per-peer table made in New, so the router keeps no state
// between Start and Wait, allocates nothing, and serves any number of
// goroutines at once. Ops that alternate between transports make runs of
// one op: one Start and one Wait call per op, still without allocation.
// Ops with an invalid peer are completed by the router with
// transport.ErrBadPeer and never reach a transport.
//
// # What the transports must do
//
// pick must be symmetric: rank a's pick for b must name the same kind of
// transport as rank b's pick for a, or a's sends go where b does not
// listen. "Even peers over A, odd over B" is not (rank 0 sees peer 1 as
// odd, rank 1 sees peer 0 as even); "same host over shm, else tcp" is.
//
// Every transport must have the router's rank and size (ranks are
// job-wide; New panics otherwise) and must make progress while the router
// waits on another one: Wait waits on the runs one after the other, so a
// transport that moved bytes only inside its own Wait could stall a peer
// that waits for it. inproc, shm and tcp progress on their own.
//
// Start returns the first error a transport's Start returned, after
// starting every run; Wait returns the first error among the ops, in op
// order. Close closes every transport and returns their errors joined.
package route
