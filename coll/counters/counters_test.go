package counters

import (
	"bytes"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
)

func mustLookup(t *testing.T, c algorithms.Collective, name string) *algorithms.Algorithm {
	t.Helper()
	a, err := algorithms.Lookup(c, name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Counting moves exactly the counters it names, the keys read them back,
// and unknown keys are -1.
func TestCountAndLookup(t *testing.T) {
	ring := mustLookup(t, algorithms.Allreduce, "ring")
	rd := mustLookup(t, algorithms.Allreduce, "recursive_doubling")
	before := map[string]int64{}
	keys := []string{"MPI_Allreduce.go", "MPI_Allreduce.ring", "MPI_Allreduce.recursive_doubling",
		"MPI_Allreduce.fallback", "MPI_Allreduce.fast", "MPI_Allreduce.host", "MPI_Allreduce.cached",
		"MPI_Reduce_scatter.ring", "MPI_Allgather.ring"}
	for _, k := range keys {
		before[k] = Lookup(k)
		if before[k] < 0 {
			t.Fatalf("Lookup(%q) = %d, want a count", k, before[k])
		}
	}
	Ran(Allreduce, ring, false)
	Ran(Allreduce, ring, false)
	Ran(Allreduce, rd, true)
	Add(Allreduce, Host)
	Add(Allreduce, Cached)
	Add(Allreduce, Fast)
	want := map[string]int64{"MPI_Allreduce.go": 3, "MPI_Allreduce.ring": 2, "MPI_Allreduce.recursive_doubling": 1,
		"MPI_Allreduce.fallback": 1, "MPI_Allreduce.fast": 1, "MPI_Allreduce.host": 1, "MPI_Allreduce.cached": 1}
	for _, k := range keys {
		if got := Lookup(k) - before[k]; got != want[k] {
			t.Errorf("%s moved by %d, want %d", k, got, want[k])
		}
	}
	for _, k := range []string{"", "MPI_Allreduce", "MPI_Allreduce.", "MPI_Allreduce.bruck", "MPI_Allreduce.nope",
		"MPI_Send.go", "mpi_allreduce.go", ".go", "MPI_Bcast.ring"} {
		if got := Lookup(k); got != -1 {
			t.Errorf("Lookup(%q) = %d, want -1", k, got)
		}
	}
	if Lookup("MPI_Barrier.bruck") < 0 || Lookup("MPI_Bcast.binomial") < 0 || Lookup("MPI_Reduce_scatter_block.shm") < 0 {
		t.Error("a valid key of Barrier, Bcast or Reduce_scatter_block is unknown")
	}
}

// The variants of Reduce_scatter_block count apart from Reduce_scatter's.
func TestBlockVariantCountsApart(t *testing.T) {
	rs := mustLookup(t, algorithms.ReduceScatter, "pairwise")
	rsb := mustLookup(t, algorithms.ReduceScatterBlock, "pairwise")
	if rs.ID() == rsb.ID() || rs.ID() < 0 || rsb.ID() < 0 || rsb.ID() >= algorithms.NumIDs() {
		t.Fatalf("IDs %d and %d (of %d)", rs.ID(), rsb.ID(), algorithms.NumIDs())
	}
	b0, v0 := Lookup("MPI_Reduce_scatter_block.pairwise"), Lookup("MPI_Reduce_scatter.pairwise")
	Ran(ReduceScatterBlock, rsb, false)
	if Lookup("MPI_Reduce_scatter_block.pairwise") != b0+1 || Lookup("MPI_Reduce_scatter.pairwise") != v0 {
		t.Error("a Reduce_scatter_block call did not count as exactly that")
	}
}

// A source adds to its path's counter, and only to it.
func TestSource(t *testing.T) {
	for _, p := range []Path{Fast, Host, Cached} {
		old := sources[p].Load()
		base := Get(Barrier, p)
		SetSource(p, func(c Call) int64 {
			if c == Barrier {
				return 40
			}
			return 0
		})
		if got := Lookup("MPI_Barrier." + p.String()); got != base+40 {
			t.Errorf("MPI_Barrier.%s = %d, want %d", p, got, base+40)
		}
		if Get(Barrier, Go) != table[Barrier][Go].Load() || Get(Allreduce, p) != table[Allreduce][p].Load() {
			t.Errorf("the %s source moved another counter", p)
		}
		sources[p].Store(old)
	}
}

// The report's line: keys in order, zeros left out but go, and fast where
// the process has a fast path.
func TestReportLine(t *testing.T) {
	k := Counts{Call: "MPI_Allreduce", Fast: 10, Go: 5,
		Algorithms: []AlgorithmCount{{"ring", 3}, {"shm", 2}}, Host: 7, Cached: 4}
	if got, want := k.String(), "MPI_Allreduce fast=10 go=5 ring=3 shm=2 host=7 cached=4"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	k = Counts{Call: "MPI_Barrier", HasFast: true, Fallback: 1}
	if got, want := k.String(), "MPI_Barrier fast=0 go=0 fallback=1"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	k = Counts{Call: "MPI_Allgather", Host: 2}
	if got, want := k.String(), "MPI_Allgather go=0 host=2"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	Ran(Gather, mustLookup(t, algorithms.Gather, "linear"), false)
	var b bytes.Buffer
	Report(&b, 3)
	want := "gocoll: rank 3: report: " + Of(Gather).String() + "\n"
	if !bytes.Contains(b.Bytes(), []byte(want)) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
	for _, line := range bytes.Split(bytes.TrimSpace(b.Bytes()), []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("gocoll: rank 3: report: MPI_")) {
			t.Errorf("report line %q", line)
		}
	}
}

// Counting allocates nothing: it runs on every call.
func TestCountingAllocatesNothing(t *testing.T) {
	a := mustLookup(t, algorithms.Allgather, "bruck")
	if n := testing.AllocsPerRun(1000, func() {
		c, _ := CallOf("MPI_Barrier")
		Ran(c, a, false)
		Add(c, Fast)
	}); n != 0 {
		t.Errorf("%v allocations per count", n)
	}
}
