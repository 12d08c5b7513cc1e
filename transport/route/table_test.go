package route_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/route"
)

// tableEnd is a transport that completes every op at once and remembers
// the peers it was given and whether it was closed.
type tableEnd struct {
	rank, size int
	peers      []int
	closed     bool
}

func (r *tableEnd) Rank() int { return r.rank }
func (r *tableEnd) Size() int { return r.size }
func (r *tableEnd) Start(ops []transport.Op) error {
	for i := range ops {
		r.peers = append(r.peers, ops[i].Peer)
		ops[i].Reset()
		ops[i].Complete(0, nil)
	}
	return nil
}
func (r *tableEnd) Wait(ops []transport.Op) error         { return transport.FirstError(ops) }
func (r *tableEnd) Test(ops []transport.Op) (bool, error) { return transport.Completed(ops) }
func (r *tableEnd) Close() error                          { r.closed = true; return nil }

// twoHosts is rank 0's table in a job of 4 where ranks 0 and 1 share a
// host: "near" reaches the same host only, "far" every rank. It counts
// the calls to New and Unused of each entry.
type twoHosts struct {
	built    map[string]*tableEnd
	unused   []string
	failNear bool
}

func (h *twoHosts) table(rank, size int) route.Table {
	h.built = map[string]*tableEnd{}
	entry := func(name string, reaches func(int) bool, fail bool) route.Entry {
		return route.Entry{Name: name, Reaches: reaches,
			New: func() (transport.Transport, error) {
				if fail {
					return nil, errors.New("no segment")
				}
				r := &tableEnd{rank: rank, size: size}
				h.built[name] = r
				return r, nil
			},
			Unused: func() { h.unused = append(h.unused, name) }}
	}
	return route.Table{
		entry("near", func(p int) bool { return p/2 == rank/2 }, h.failNear),
		entry("far", func(int) bool { return true }, false),
	}
}

// Each peer goes through the first entry that reaches it, though a later
// one reaches it too.
func TestTablePrefersEarlierEntries(t *testing.T) {
	var h twoHosts
	pl, err := h.table(0, 4).Pick(0, 4, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Peers("near"); !slices.Equal(got, []int{1}) {
		t.Errorf("near serves %v, want [1]", got)
	}
	if got := pl.Peers("far"); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("far serves %v, want [2 3]", got)
	}
	if s := pl.String(); s != "near to [1], far to [2 3]" {
		t.Errorf("plan reads %q", s)
	}
	tr, err := pl.Build()
	if err != nil {
		t.Fatal(err)
	}
	ops := []transport.Op{{Peer: 3}, {Peer: 1}, {Peer: 2}}
	if err := tr.Start(ops); err != nil {
		t.Fatal(err)
	}
	if err := tr.Wait(ops); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.built["near"].peers, []int{1}) || !slices.Equal(h.built["far"].peers, []int{3, 2}) {
		t.Errorf("ops went near to %v, far to %v; want [1] and [3 2]", h.built["near"].peers, h.built["far"].peers)
	}
	if h.unused != nil {
		t.Errorf("released %v, though both are used", h.unused)
	}
	tr.Close()
	if !h.built["near"].closed || !h.built["far"].closed {
		t.Error("closing the router left a transport open")
	}
}

// An entry no peer picks is not built but released, and the one that is
// built is the transport itself, not a router.
func TestTableBuildsOnlyWhatPeersPick(t *testing.T) {
	var h twoHosts
	pl, err := h.table(0, 2).Pick(0, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	if !pl.Uses("near") || pl.Uses("far") {
		t.Fatalf("plan %s: want near only", pl)
	}
	tr, err := pl.Build()
	if err != nil {
		t.Fatal(err)
	}
	if tr != transport.Transport(h.built["near"]) || h.built["far"] != nil {
		t.Errorf("built %v, returned %T; want near alone", h.built, tr)
	}
	if !slices.Equal(h.unused, []string{"far"}) {
		t.Errorf("released %v, want [far]", h.unused)
	}
}

// A rank alone still gets an endpoint: the first candidate.
func TestTableRankAlone(t *testing.T) {
	var h twoHosts
	pl, err := h.table(0, 1).Pick(0, 1, "far")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pl.Build(); err != nil {
		t.Fatal(err)
	}
	if h.built["far"] == nil || h.built["near"] != nil {
		t.Errorf("built %v, want far alone", h.built)
	}
}

// Forcing an entry sends every peer through it, even those an earlier
// entry reaches, and releases the others.
func TestTableForced(t *testing.T) {
	var h twoHosts
	pl, err := h.table(0, 4).Pick(0, 4, "far")
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Peers("far"); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("forced far serves %v, want [1 2 3]", got)
	}
	if s := pl.String(); s != "far to [1 2 3]" {
		t.Errorf("plan reads %q", s)
	}
	if _, err := pl.Build(); err != nil {
		t.Fatal(err)
	}
	if h.built["near"] != nil || !slices.Equal(h.unused, []string{"near"}) {
		t.Errorf("forced far: built %v, released %v", h.built, h.unused)
	}
}

func TestTablePickErrors(t *testing.T) {
	var h twoHosts
	for _, c := range []struct {
		table route.Table
		force string
		want  []string
	}{
		{h.table(1, 4), "near", []string{"GOCOLL_TRANSPORT=near", "near cannot reach rank 2"}},
		{h.table(0, 4), "ib", []string{"GOCOLL_TRANSPORT=ib", "want auto, near, far"}},
		{h.table(0, 4)[:1], "auto", []string{"no transport (near) reaches rank 2"}},
	} {
		_, err := c.table.Pick(1, 4, c.force)
		if err == nil {
			t.Errorf("force %q: no error", c.force)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("force %q: error %q does not say %q", c.force, err, w)
			}
		}
	}
}

// A failed New closes what was built before it, releases what comes
// after it, and names the entry.
func TestTableBuildFailure(t *testing.T) {
	h := twoHosts{failNear: true}
	pl, err := h.table(0, 4).Pick(0, 4, "auto")
	if err != nil {
		t.Fatal(err)
	}
	_, err = pl.Build()
	if err == nil || !strings.Contains(err.Error(), "near transport: no segment") {
		t.Fatalf("Build: %v, want near's failure", err)
	}
	if h.built["far"] != nil || !slices.Equal(h.unused, []string{"far"}) {
		t.Errorf("after near failed: built %v, released %v; want far released", h.built, h.unused)
	}

	// The other order: far first, built, then closed when near fails.
	h = twoHosts{failNear: true}
	tb := h.table(0, 4)
	tb[0], tb[1] = tb[1], tb[0]
	tb[0].Reaches = func(p int) bool { return p >= 2 }
	if pl, err = tb.Pick(0, 4, "auto"); err != nil {
		t.Fatal(err)
	}
	if _, err = pl.Build(); err == nil {
		t.Fatal("Build succeeded with a failing entry")
	}
	if far := h.built["far"]; far == nil || !far.closed {
		t.Errorf("far was not built and closed: %v", far)
	}
}
