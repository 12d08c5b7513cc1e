package route

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gocoll/gocoll/transport"
)

// Entry is one transport a rank may use, as a line of a Table.
type Entry struct {
	Name string
	// Reaches reports whether the transport can carry ops with peer. It
	// must be symmetric (see the package doc) and is called before New.
	Reaches func(peer int) bool
	// New builds the transport. It is called once, in table order, and
	// only if some peer picks the entry (or, for a rank without peers,
	// for the first candidate); a constructor that is collective must
	// therefore be picked by every rank that takes part.
	New func() (transport.Transport, error)
	// Unused, if set, releases what the caller prepared for the entry
	// (a listener, an endpoint made to learn Reaches) when no peer picks
	// it, or when an earlier entry's New failed. Build calls it instead
	// of New.
	Unused func()
}

// Table lists the transports a rank may use, in order of preference: each
// peer goes through the first entry that reaches it, as NCCL tries its
// transports in order for each pair of ranks. The standalone job (shm,
// tcp) and the preload (shm, hostmpi) each build their table and pick
// with it, so GOCOLL_TRANSPORT means the same in both: "auto" uses the
// whole table, a name uses that entry alone.
type Table []Entry

// Plan is the table's choice for every peer of one rank.
type Plan struct {
	rank, size int
	table      Table
	cands      []int // the entries in play: all, or the forced one
	via        []int // the entry of each peer; -1 for the rank itself
}

// Pick picks an entry for every peer of rank in a job of size: the first
// candidate that reaches it. force is "auto" (or "") for every entry, or
// the name of the one entry to use. A forced entry that does not reach
// a peer, a peer no entry reaches, and a force that names no entry are
// errors that name the transport and the peer.
func (tb Table) Pick(rank, size int, force string) (*Plan, error) {
	pl := &Plan{rank: rank, size: size, table: tb, via: make([]int, size)}
	forced := force != "" && force != "auto"
	if !forced {
		for i := range tb {
			pl.cands = append(pl.cands, i)
		}
	} else {
		for i, e := range tb {
			if e.Name == force {
				pl.cands = []int{i}
			}
		}
		if pl.cands == nil {
			return nil, fmt.Errorf("GOCOLL_TRANSPORT=%s: want auto, %s", force, strings.Join(tb.names(), ", "))
		}
	}
	for peer := range size {
		pl.via[peer] = -1
		if peer == rank {
			continue
		}
		for _, i := range pl.cands {
			if tb[i].Reaches(peer) {
				pl.via[peer] = i
				break
			}
		}
		if pl.via[peer] >= 0 {
			continue
		}
		if forced {
			return nil, fmt.Errorf("GOCOLL_TRANSPORT=%s: %s cannot reach rank %d", force, tb[pl.cands[0]].Name, peer)
		}
		return nil, fmt.Errorf("no transport (%s) reaches rank %d", strings.Join(tb.names(), ", "), peer)
	}
	return pl, nil
}

func (tb Table) names() []string {
	ns := make([]string, len(tb))
	for i, e := range tb {
		ns[i] = e.Name
	}
	return ns
}

// Uses reports whether some peer goes through the entry called name, or,
// for a rank without peers, whether it is the first candidate.
func (pl *Plan) Uses(name string) bool {
	for _, i := range pl.used() {
		if pl.table[i].Name == name {
			return true
		}
	}
	return false
}

// Peers returns the peers that go through the entry called name.
func (pl *Plan) Peers(name string) []int {
	var ps []int
	for peer, i := range pl.via {
		if i >= 0 && pl.table[i].Name == name {
			ps = append(ps, peer)
		}
	}
	return ps
}

// String says which peers each candidate serves: "shm to [1 2], tcp to
// [3]".
func (pl *Plan) String() string {
	parts := make([]string, len(pl.cands))
	for k, i := range pl.cands {
		ps := pl.Peers(pl.table[i].Name)
		if ps == nil {
			ps = []int{}
		}
		parts[k] = fmt.Sprintf("%s to %v", pl.table[i].Name, ps)
	}
	return strings.Join(parts, ", ")
}

// used returns the entries to build, in table order.
func (pl *Plan) used() []int {
	var us []int
	for _, i := range pl.cands {
		for _, j := range pl.via {
			if j == i {
				us = append(us, i)
				break
			}
		}
	}
	if us == nil && len(pl.cands) > 0 {
		us = pl.cands[:1] // a rank alone still needs an endpoint
	}
	return us
}

// Build builds the entries the plan uses (New) and releases the others,
// forced out or picked by no peer (Unused), and returns one transport: the single entry used, or a router
// between them (New in this package). If a New fails, the transports
// already built are closed, the entries after it released, and the error
// names the entry.
func (pl *Plan) Build() (transport.Transport, error) {
	used := pl.used()
	ts := make([]transport.Transport, 0, len(used))
	at := make([]int, len(pl.table)) // entry -> index in ts
	var err error
	for i := range pl.table {
		if !contains(used, i) || err != nil {
			// Unused, or not built after a failure: released all the same.
			if u := pl.table[i].Unused; u != nil {
				u()
			}
			continue
		}
		var t transport.Transport
		if t, err = pl.table[i].New(); err != nil {
			err = fmt.Errorf("%s transport: %w", pl.table[i].Name, err)
			continue
		}
		at[i] = len(ts)
		ts = append(ts, t)
	}
	if err != nil {
		var errs []error
		for _, t := range ts {
			errs = append(errs, t.Close())
		}
		return nil, errors.Join(append([]error{err}, errs...)...)
	}
	if len(ts) == 1 {
		return ts[0], nil
	}
	return New(pl.rank, pl.size, ts, func(peer int) int { return at[pl.via[peer]] }), nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
