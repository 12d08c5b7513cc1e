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

// concat returns a's terms followed by b's, merging a run that continues.
func concat(a, b terms) terms {
	out := make(terms, 0, len(a)+len(b))
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

// isAll reports whether t holds every rank 0..p-1 exactly once, in rank
// order when ordered is set.
func (t terms) isAll(p int, ordered bool) bool {
	if ordered {
		return len(t) == 1 && t[0].lo == 0 && int(t[0].hi) == p-1
	}
	s := slices.Clone(t)
	slices.SortFunc(s, func(a, b span) int { return int(a.lo) - int(b.lo) })
	next := int32(0)
	for _, x := range s {
		if x.lo != next {
			return false
		}
		next = x.hi + 1
	}
	return int(next) == p
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

// seg is a run of len elements of a buffer starting at off. If def is set,
// element off+k holds the combination terms of the contributions to global
// element index base+k.
type seg struct {
	off, len int
	def      bool
	base     int
	terms    terms
}

func (s seg) end() int { return s.off + s.len }

// trim returns the part of s from offset lo to hi (buffer offsets).
func (s seg) trim(lo, hi int) seg {
	d := lo - s.off
	s.off, s.len = lo, hi-lo
	if s.def {
		s.base += d
	}
	return s
}

// mergeable reports whether b continues a with the same contents.
func mergeable(a, b seg) bool {
	if a.end() != b.off || a.def != b.def {
		return false
	}
	return !a.def || (a.base+a.len == b.base && a.terms.equal(b.terms))
}

// symBuf is a buffer as a sorted list of segments covering [0, n).
type symBuf struct {
	n    int
	segs []seg
}

func newSymBuf(n int) *symBuf {
	b := &symBuf{n: n}
	if n > 0 {
		b.segs = []seg{{off: 0, len: n}}
	}
	return b
}

// find returns the index of the segment holding offset off.
func (b *symBuf) find(off int) int {
	i, _ := slices.BinarySearchFunc(b.segs, off, func(s seg, off int) int {
		switch {
		case s.end() <= off:
			return -1
		case s.off > off:
			return 1
		}
		return 0
	})
	return i
}

// read returns the segments of [off, off+n), trimmed to it.
func (b *symBuf) read(off, n int) []seg {
	var out []seg
	for i := b.find(off); i < len(b.segs) && b.segs[i].off < off+n; i++ {
		s := b.segs[i]
		out = append(out, s.trim(max(s.off, off), min(s.end(), off+n)))
	}
	return out
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
	placed := make([]seg, 0, len(data))
	at := off
	for _, s := range data {
		s.off = at
		at += s.len
		if k := len(placed); k > 0 && mergeable(placed[k-1], s) {
			placed[k-1].len += s.len
			continue
		}
		placed = append(placed, s)
	}
	b.segs = slices.Replace(b.segs, i, j, placed...)
	// Merge with the neighbours so that buffers written block by block do
	// not keep one segment per block forever.
	if k := i + len(placed); k < len(b.segs) && mergeable(b.segs[k-1], b.segs[k]) {
		b.segs[k-1].len += b.segs[k].len
		b.segs = slices.Delete(b.segs, k, k+1)
	}
	if i > 0 && mergeable(b.segs[i-1], b.segs[i]) {
		b.segs[i-1].len += b.segs[i].len
		b.segs = slices.Delete(b.segs, i, i+1)
	}
}
