package check_test

import (
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/check"
	"github.com/gocoll/gocoll/schedule"
)

func lookup(t *testing.T, c algorithms.Collective, name string) *algorithms.Algorithm {
	a, err := algorithms.Lookup(c, name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Canonical must tell the canonical tree from other associations that
// combine every rank exactly once, and say what it found.
func TestCanonicalRejectsOtherAssociations(t *testing.T) {
	cases := []struct {
		alg   string
		p     int
		want  string // in the error; "" for a pass
		count int
	}{
		{"ring", 3, "not T(0,3)", 7}, // (x1 + x2) + x0 for block 0
		{"ring", 2, "", 7},
		{"recursive_doubling", 4, "", 9},
		{"recursive_doubling", 8, "", 9},
		{"recursive_doubling", 3, "", 9},           // the fold (x0 x1) then x2: the tree
		{"recursive_doubling", 5, "not T(0,5)", 9}, // the fold's (x0 x1) then x2
		{"recursive_doubling", 6, "", 9},
		{"rabenseifner", 16, "", 33},
		{"rabenseifner", 12, "", 33},
		{"rabenseifner", 10, "not T(0,10)", 33},
	}
	for _, tc := range cases {
		a := lookup(t, algorithms.Allreduce, tc.alg)
		err := check.Canonical(a, algorithms.Params{P: tc.p, Count: tc.count})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s p=%d: %v", tc.alg, tc.p, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s p=%d: got %v, want an error with %q", tc.alg, tc.p, err, tc.want)
		}
	}
	// The error names the rank, the element and the association.
	err := check.Canonical(lookup(t, algorithms.Allreduce, "ring"), algorithms.Params{P: 3, Count: 3})
	if err == nil || !strings.Contains(err.Error(), "rank 0: output element 0 (vector element 0) is ((x1 + x2) + x0)") {
		t.Errorf("ring p=3: got %v", err)
	}
	// The order-preserving pairwise reduce-scatter is left to right from
	// the owner: x0 + (x1 + x2) is not the tree either.
	err = check.Canonical(lookup(t, algorithms.ReduceScatterBlock, "pairwise"), algorithms.Params{P: 3, Counts: []int{2, 2, 2}})
	if err == nil || !strings.Contains(err.Error(), "not T(0,3)") {
		t.Errorf("pairwise p=3: got %v", err)
	}
}

// a op b and b op a are the same node; a value combined with itself, or
// two values that are not siblings, are not.
func TestCanonicalOperandsAndSiblings(t *testing.T) {
	rd := lookup(t, algorithms.Allreduce, "recursive_doubling")
	swap := func(s *schedule.Schedule) {
		for i := range s.Rounds {
			for j := range s.Rounds[i].Steps {
				if st := &s.Rounds[i].Steps[j]; st.Kind == schedule.Reduce {
					st.A, st.B = st.B, st.A
				}
			}
		}
	}
	build := func(p algorithms.Params) *schedule.Schedule {
		s := rd.Build(p)
		if p.Rank == 1 {
			swap(s)
		}
		return s
	}
	a := *rd
	a.Build = build
	if err := check.Canonical(&a, algorithms.Params{P: 8, Count: 5}); err != nil {
		t.Errorf("operands swapped: %v", err)
	}
	a.Build = mutate(t, algorithms.Allreduce, "recursive_doubling", func(s *schedule.Schedule) {
		st := firstStep(s, schedule.Reduce)
		st.B = st.A // x0 + x0 on rank 1
	})
	if err := check.Canonical(&a, algorithms.Params{P: 4, Count: 5}); err == nil || !strings.Contains(err.Error(), "(x0 + x0)") {
		t.Errorf("a value with itself: got %v", err)
	}
}

// Ring at p = 4 combines x1 and x2 first: siblings of nothing.
func TestCanonicalRingP4(t *testing.T) {
	err := check.Canonical(lookup(t, algorithms.Allreduce, "ring"), algorithms.Params{P: 4, Count: 4})
	if err == nil || !strings.Contains(err.Error(), "not T(0,4)") {
		t.Fatalf("got %v", err)
	}
}
