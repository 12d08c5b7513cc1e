package tuner_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/tuner"
)

// ClassRange is the model's size class: every size of it is in it, its
// neighbours are not, and classes tile the sizes.
func TestClassRange(t *testing.T) {
	prev := int64(-1)
	for b := int64(0); b < 1<<20; b++ {
		lo, hi := tuner.ClassRange(b)
		if b < lo || b > hi {
			t.Fatalf("ClassRange(%d) = [%d, %d]", b, lo, hi)
		}
		if tuner.SizeClass(lo) != tuner.SizeClass(b) || tuner.SizeClass(hi) != tuner.SizeClass(b) ||
			(lo > 0 && tuner.SizeClass(lo-1) == tuner.SizeClass(b)) || tuner.SizeClass(hi+1) == tuner.SizeClass(b) {
			t.Fatalf("ClassRange(%d) = [%d, %d] is not its class", b, lo, hi)
		}
		if lo == b && lo != prev+1 {
			t.Fatalf("class of %d starts at %d after one ending at %d", b, lo, prev)
		}
		prev = hi
	}
}

// Span stops at every rule edge of the collective inside the class, and
// Choose answers alike across it.
func TestSpan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(path, []byte(`{"rules": [
		{"collective": "allreduce", "max_bytes": 1000, "algorithm": "ring"},
		{"collective": "allreduce", "min_bytes": 1001, "max_bytes": 1003, "algorithm": "recursive_doubling"},
		{"collective": "allgather", "min_bytes": 1002, "algorithm": "bruck"}
	]}`), 0o644)
	tu, err := newTuner(env("GOCOLL_TUNING_FILE", path))
	if err != nil {
		t.Fatal(err)
	}
	params := algorithms.Params{P: 4, Commutative: true}
	for _, c := range []struct {
		coll   algorithms.Collective
		b      int64
		lo, hi int64
		file   bool // the file's rule decides
	}{
		{algorithms.Allreduce, 999, 961, 1000, true}, // class (960, 1024]
		{algorithms.Allreduce, 1001, 1001, 1003, true},
		{algorithms.Allreduce, 1010, 1004, 1024, false},
		{algorithms.Allgather, 1000, 961, 1001, false},
		{algorithms.Allgather, 1024, 1002, 1024, true},
		{algorithms.ReduceScatter, 1000, 961, 1024, false},
	} {
		q := tuner.Query{Collective: c.coll, Bytes: c.b, Params: params}
		lo, hi := tu.Span(q)
		if lo != c.lo || hi != c.hi {
			t.Errorf("%s %d B: Span [%d, %d], want [%d, %d]", c.coll, c.b, lo, hi, c.lo, c.hi)
		}
		want, err := tu.Choose(q)
		if err != nil {
			t.Fatal(err)
		}
		if want.File != c.file {
			t.Errorf("%s %d B: Choice.File %v, want %v (%s)", c.coll, c.b, want.File, c.file, want.Why)
		}
		for b := lo; b <= hi; b++ {
			q.Bytes = b
			if got, _ := tu.Choose(q); got.Name() != want.Name() {
				t.Errorf("%s: %d B chooses %s, %d B %s, in one span", c.coll, c.b, want.Name(), b, got.Name())
			}
		}
	}
}
