package check

import (
	"fmt"
	"strings"

	"github.com/gocoll/gocoll/algorithms"
)

// Canonical proves that algorithm a computes, for a commutative op, the
// canonical association T(0, p) (algorithms/canonical.go) at every element
// of every rank's result, on the call described by base (base.Rank is
// ignored): what reproducible mode needs. It runs a's schedules whatever
// a.Canonical says, with Params.Reproducible set, and makes every check Run
// makes besides.
//
// A value is tracked as the node of the canonical tree it is, an interval
// [lo, hi) of ranks: combining two values gives a node only when they are
// its two children (a op b and b op a alike, the op being commutative bit
// for bit). Any other combination is kept as the expression it is, which
// the error prints with the rank and element it reached.
func Canonical(a *algorithms.Algorithm, base algorithms.Params) error {
	base.Commutative = true
	if err := a.Check(base); err != nil {
		return err
	}
	base.Reproducible = true
	return run(a.Collective, base, a.Build, true)
}

// node returns the value a op b in canonical mode: the parent node when a
// and b are the two children of a node of T(0, p), else the expression.
func (s *slab) node(a, b termID, p int) termID {
	if a < noTerms && b < noTerms { // single runs: nodes of the tree
		x, y := runOf(a), runOf(b)
		if x.lo > y.lo {
			x, y = y, x
		}
		lo, mid, hi := int(x.lo), int(y.lo), int(y.hi)+1
		if int(x.hi)+1 == mid && isNode(lo, hi, p) && algorithms.CanonicalSplit(lo, hi) == mid {
			return runID(span{x.lo, y.hi})
		}
	}
	s.pairs = append(s.pairs, [2]termID{a, b})
	return s.add(terms{{pairMark, int32(len(s.pairs) - 1)}})
}

// pairMark marks a term list that stands for an expression of
// slab.pairs, not for ranks.
const pairMark = -2

// runOf returns the run of ranks encoded in a run id.
func runOf(id termID) span {
	v := int64(-2 - id)
	return span{int32(v >> 32), int32(uint32(v))}
}

// isNode reports whether [lo, hi) is a node of T(0, p).
func isNode(lo, hi, p int) bool {
	a, b := 0, p
	for {
		if a == lo && b == hi {
			return true
		}
		if b-a < 2 || lo < a || hi > b {
			return false
		}
		m := algorithms.CanonicalSplit(a, b)
		switch {
		case hi <= m:
			b = m
		case lo >= m:
			a = m
		default:
			return false
		}
	}
}

// assoc prints the association value id holds: x3 for a rank's input,
// T(lo,hi) for a node of the tree, (a + b) for any other combination;
// cut short past a few hundred characters.
func (s *slab) assoc(id termID) string {
	var b strings.Builder
	s.render(&b, id)
	if b.Len() > 300 {
		return b.String()[:300] + "..."
	}
	return b.String()
}

func (s *slab) render(b *strings.Builder, id termID) {
	if b.Len() > 300 {
		return
	}
	if id < noTerms {
		r := runOf(id)
		if r.lo == r.hi {
			fmt.Fprintf(b, "x%d", r.lo)
		} else {
			fmt.Fprintf(b, "T(%d,%d)", r.lo, r.hi+1)
		}
		return
	}
	if t := s.t[id]; len(t) == 1 && t[0].lo == pairMark {
		pr := s.pairs[t[0].hi]
		b.WriteByte('(')
		s.render(b, pr[0])
		b.WriteString(" + ")
		s.render(b, pr[1])
		b.WriteByte(')')
		return
	}
	b.WriteString(s.t[id].String())
}
