package check

import (
	"fmt"
	"slices"
)

// span is the ordered run of ranks lo, lo+1, ..., hi.
type span struct{ lo, hi int32 }

// terms is the in-order list of contributions combined in a value: reducing
// a op b concatenates the terms of a and of b. Term lists are immutable once
// built, so segments share them freely.
type terms []span

// concat appends a's terms followed by b's to out, merging a run that
// continues.
func concat(out, a, b terms) terms {
	out = append(out, a...)
	for _, s := range b {
		if n := len(out); n > 0 && out[n-1].hi+1 == s.lo {
			out[n-1].hi = s.hi
			continue
		}
		out = append(out, s)
	}
	return out
}

func (t terms) equal(u terms) bool {
	if len(t) != len(u) {
		return false
	}
	if len(t) > 0 && &t[0] == &u[0] {
		return true
	}
	return slices.Equal(t, u)
}

// union appends the terms of a and b to out as one list sorted by rank,
// merging runs that touch. It is the combination for commutative ops, where
// order does not matter: keeping a canonical form lets equal results merge
// into one segment. Overlapping runs (a rank counted twice) are kept apart
// so that the final check sees them.
func union(out, a, b terms) terms {
	add := func(s span) {
		if n := len(out); n > 0 && out[n-1].hi+1 == s.lo {
			out[n-1].hi = s.hi
			return
		}
		out = append(out, s)
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j == len(b) || (i < len(a) && a[i].lo <= b[j].lo) {
			add(a[i])
			i++
		} else {
			add(b[j])
			j++
		}
	}
	return out
}

// isAll reports whether t holds every rank 0..p-1 exactly once, in rank
// order. (Commutative results are built with union, which sorts them.)
func (t terms) isAll(p int) bool {
	return len(t) == 1 && t[0].lo == 0 && int(t[0].hi) == p-1
}

func (t terms) String() string {
	s := "{"
	for i, x := range t {
		if i > 0 {
			s += " "
		}
		if x.lo == x.hi {
			s += fmt.Sprint(x.lo)
		} else {
			s += fmt.Sprintf("%d..%d", x.lo, x.hi)
		}
	}
	return s + "}"
}

// termID names a term list: a single run of ranks lo..hi is encoded in the
// id itself (-2 - (lo<<32 | hi)), longer lists are indexes into a slab,
// and noTerms marks uninitialised memory.
type termID int64

const noTerms termID = -1

func runID(s span) termID { return -2 - termID(int64(s.lo)<<32|int64(uint32(s.hi))) }

// slab stores the term lists of one check run, so that segments hold a
// small id instead of a slice: segment lists then contain no pointers and
// move as plain memory. Single runs of ranks, by far the most common lists,
// live in the id itself and are not stored.
type slab struct {
	t []terms
	// pairs holds the operands of the combinations that are not nodes of
	// the canonical tree, in canonical mode.
	pairs [][2]termID
}

// add returns the id of t, which the caller may reuse afterwards.
func (s *slab) add(t terms) termID {
	if len(t) == 1 && t[0].lo >= 0 {
		return runID(t[0])
	}
	s.t = append(s.t, slices.Clone(t))
	return termID(len(s.t) - 1)
}

// get returns the terms of id; a single run is written to buf.
func (s *slab) get(id termID, buf *[1]span) terms {
	if id >= 0 {
		return s.t[id]
	}
	buf[0] = runOf(id)
	return buf[:]
}

func (s *slab) equal(a, b termID) bool {
	if a == b {
		return true
	}
	if a < 0 || b < 0 {
		return false // runs are equal only if their ids are; and noTerms
	}
	return s.t[a].equal(s.t[b])
}

// seg is a run of len elements of a buffer starting at off. If def() is
// set, element off+k holds the combination id of the contributions to
// global element index base+k.
type seg struct {
	off, len int
	base     int
	id       termID
}

func (s seg) end() int  { return s.off + s.len }
func (s seg) def() bool { return s.id != noTerms }

// trim returns the part of s from offset lo to hi (buffer offsets).
func (s seg) trim(lo, hi int) seg {
	d := lo - s.off
	s.off, s.len = lo, hi-lo
	if s.def() {
		s.base += d
	}
	return s
}

// symBuf is a buffer as a sorted list of segments covering [0, n).
type symBuf struct {
	n    int
	segs []seg
	slab *slab
	tmp  []seg // reused by write
}

func newSymBuf(n int, sl *slab) *symBuf {
	b := &symBuf{n: n, slab: sl}
	if n > 0 {
		b.segs = []seg{{off: 0, len: n, id: noTerms}}
	}
	return b
}

// mergeable reports whether b continues a with the same contents.
func (b *symBuf) mergeable(x, y seg) bool {
	if x.end() != y.off || x.def() != y.def() {
		return false
	}
	return !x.def() || (x.base+x.len == y.base && b.slab.equal(x.id, y.id))
}

// find returns the index of the segment holding offset off.
func (b *symBuf) find(off int) int {
	lo, hi := 0, len(b.segs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b.segs[m].end() <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// read appends the segments of [off, off+n), trimmed to it, to dst.
func (b *symBuf) read(dst []seg, off, n int) []seg {
	for i := b.find(off); i < len(b.segs) && b.segs[i].off < off+n; i++ {
		s := b.segs[i]
		dst = append(dst, s.trim(max(s.off, off), min(s.end(), off+n)))
	}
	return dst
}

// split makes sure a segment boundary falls at off and returns the index of
// the segment starting there.
func (b *symBuf) split(off int) int {
	if off >= b.n {
		return len(b.segs)
	}
	i := b.find(off)
	s := b.segs[i]
	if s.off == off {
		return i
	}
	b.segs = slices.Insert(b.segs, i+1, s.trim(off, s.end()))
	b.segs[i] = s.trim(s.off, off)
	return i + 1
}

// write replaces [off, off+len of data) by data, whose segments are laid
// out one after the other from off.
func (b *symBuf) write(off int, data []seg) {
	n := 0
	for _, s := range data {
		n += s.len
	}
	if n == 0 {
		return
	}
	i := b.split(off)
	j := b.split(off + n)
	placed := b.tmp[:0]
	at := off
	for _, s := range data {
		s.off = at
		at += s.len
		if k := len(placed); k > 0 && b.mergeable(placed[k-1], s) {
			placed[k-1].len += s.len
			continue
		}
		placed = append(placed, s)
	}
	b.tmp = placed
	b.segs = slices.Replace(b.segs, i, j, placed...)
	// Merge with the neighbours so that buffers written block by block do
	// not keep one segment per block forever.
	if k := i + len(placed); k < len(b.segs) && b.mergeable(b.segs[k-1], b.segs[k]) {
		b.segs[k-1].len += b.segs[k].len
		b.segs = slices.Delete(b.segs, k, k+1)
	}
	if i > 0 && b.mergeable(b.segs[i-1], b.segs[i]) {
		b.segs[i-1].len += b.segs[i].len
		b.segs = slices.Delete(b.segs, i, i+1)
	}
}
