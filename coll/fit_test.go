package coll_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/tuner"
)

// sumFloats is an auto allreduce of n float32 on c (the tuner decides,
// or alg forces one).
func sumFloats(c *coll.Comm, n int, alg string) error {
	buf := make([]byte, 4*n)
	return c.Allreduce(coll.Args{InPlace: true, Recv: buf, Count: n, Type: ops.Float, Op: coll.Op{Builtin: ops.Sum}, Algorithm: alg})
}

// machines collects, per rank, the machine a communicator decides with.
type machines struct {
	mu sync.Mutex
	m  map[string][]model.Machine
}

func (ms *machines) put(what string, c *coll.Comm) (fitted bool) {
	m, fitted := c.Machine()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = map[string][]model.Machine{}
	}
	if ms.m[what] == nil {
		ms.m[what] = make([]model.Machine, c.Size())
	}
	ms.m[what][c.Rank()] = m
	return fitted
}

// The trigger: 8 in-process ranks on 2 nodes of 4. A forced call and the
// calls on one node's communicator never fit; the first call the model
// decides on the world fits once, every rank taking part (8
// measurements, one per rank), and every rank then decides with the same
// machine; later calls do not fit again; a communicator made after the
// fit inherits it (no exchange at all), and one made before it agrees on
// it at its own first model call (8 agreements, no measurement). With
// GOCOLL_DEBUG=info each rank says so.
func TestFitOnceAtTheFirstModelCall(t *testing.T) {
	tu, err := tuner.New(envvar.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	debug := &lockedWriter{}
	cfg := &coll.Config{Tuner: tu, JobID: "fit", Fit: true, Debug: debug}
	var ms machines
	runRanks(t, "", 8, cfg, algorithms.BlockNodeMap(8, 4), func(world *coll.Comm) error {
		before, err := world.Dup("before")
		if err != nil {
			return err
		}
		defer before.Free()
		node, err := world.SplitShared(0, "node")
		if err != nil {
			return err
		}
		defer node.Free()
		if err := sumFloats(world, 1<<18, "ring"); err != nil { // forced
			return err
		}
		if err := sumFloats(node, 1<<18, ""); err != nil { // one node: the rules
			return err
		}
		if err := fitCounts(world, cfg, "forced and one-node calls", 0, 0); err != nil {
			return err
		}
		if err := sumFloats(world, 1<<18, ""); err != nil { // the model's: the fit
			return err
		}
		if err := fitCounts(world, cfg, "the first model call", 8, 0); err != nil {
			return err
		}
		if !ms.put("world", world) {
			return fmt.Errorf("the world does not decide with a fitted machine")
		}
		for _, n := range []int{16, 1 << 12, 1 << 20} {
			if err := sumFloats(world, n, ""); err != nil {
				return err
			}
		}
		after, err := world.Dup("after")
		if err != nil {
			return err
		}
		defer after.Free()
		if err := sumFloats(after, 1<<18, ""); err != nil {
			return err
		}
		if err := fitCounts(world, cfg, "later calls and a communicator made after the fit", 8, 0); err != nil {
			return err
		}
		ms.put("after", after)
		if err := sumFloats(before, 1<<18, ""); err != nil {
			return err
		}
		if err := fitCounts(world, cfg, "a communicator made before the fit", 8, 8); err != nil {
			return err
		}
		ms.put("before", before)
		if ms.put("node", node) {
			return fmt.Errorf("the node's communicator fitted")
		}
		return nil
	})
	if t.Failed() {
		return
	}
	w := ms.m["world"]
	if w[0] == model.Default {
		t.Errorf("the fitted machine is model.Default's")
	}
	for what, got := range ms.m {
		for r, m := range got {
			want := w[0]
			if what == "node" {
				want = model.Default
			}
			if m != want {
				t.Errorf("%s, rank %d: machine %+v, want %+v", what, r, m, want)
			}
		}
	}
	log := debug.String()
	if n := strings.Count(log, "MPI_COMM_WORLD: machine fitted in the job at MPI_Allreduce of 1048576 B (the model chose "); n != 8 {
		t.Errorf("%d ranks said they fitted the machine, want 8:\n%s", n, log)
	}
	if n := strings.Count(log, "before: the job's machine, rank 0's, agreed on at MPI_Allreduce"); n != 8 {
		t.Errorf("%d ranks said they agreed on the job's machine, want 8:\n%s", n, log)
	}
	if !strings.Contains(log, "gocoll: rank 0:   between nodes (rank 0 <-> rank 4): alpha") {
		t.Errorf("rank 0 did not describe the fit:\n%s", log)
	}
	if !strings.Contains(log, "algorithm=") || !strings.Contains(log, "model on the fitted machine (p=8, 2 nodes, up to 4 a node") {
		t.Errorf("no call decided on the fitted machine:\n%s", log)
	}
	t.Logf("rank 0's fit:\n%s", grepLines(log, "gocoll: rank 0: MPI_COMM_WORLD: machine", "gocoll: rank 0:   "))
}

// fitCounts checks cfg's counts of fits measured and agreed on once every
// rank of world has made its calls so far (a barrier before) and before
// any goes on to more (a barrier after): the ranks share cfg.
func fitCounts(world *coll.Comm, cfg *coll.Config, what string, wantMeasured, wantAgreed int) error {
	if err := world.Barrier(); err != nil {
		return err
	}
	measured, agreed := cfg.FitCounts()
	if err := world.Barrier(); err != nil {
		return err
	}
	if measured != wantMeasured || agreed != wantAgreed {
		return fmt.Errorf("%s: %d measurements and %d agreements, want %d and %d", what, measured, agreed, wantMeasured, wantAgreed)
	}
	return nil
}

// grepLines returns the lines of text that start with one of prefixes.
func grepLines(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// No fit where GOCOLL_FIT=0, nor where the tuning file (here the tuner's
// options) gives the machine: the model decides with the one it has.
func TestNoFit(t *testing.T) {
	given := model.Slow
	withMachine, err := tuner.NewWithOptions(envvar.Settings{}, tuner.Options{Machine: &given})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := tuner.New(envvar.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		cfg  *coll.Config
		want model.Machine
	}{
		{"GOCOLL_FIT=0", &coll.Config{Tuner: plain, JobID: "nofit"}, model.Default},
		{"a given machine", &coll.Config{Tuner: withMachine, JobID: "given", Fit: true}, given},
	} {
		runRanks(t, tc.what+": ", 4, tc.cfg, algorithms.BlockNodeMap(4, 2), func(c *coll.Comm) error {
			if err := sumFloats(c, 1<<18, ""); err != nil {
				return err
			}
			if m, fitted := c.Machine(); fitted || m != tc.want {
				return fmt.Errorf("machine %+v (fitted %v), want %+v", m, fitted, tc.want)
			}
			return nil
		})
		if measured, agreed := tc.cfg.FitCounts(); measured+agreed != 0 {
			t.Errorf("%s: %d fits, %d agreements", tc.what, measured, agreed)
		}
	}
}

// A nonblocking call can be the first the model decides: its begin fits,
// on every rank, wherever the request is moved on.
func TestFitInARequest(t *testing.T) {
	tu, err := tuner.New(envvar.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &coll.Config{Tuner: tu, JobID: "fitreq", Fit: true}
	runRanks(t, "", 4, cfg, algorithms.BlockNodeMap(4, 2), func(c *coll.Comm) error {
		c.OwnProgress()
		buf := make([]byte, 4<<16)
		r, err := c.Iallreduce(coll.Args{InPlace: true, Recv: buf, Count: 1 << 16, Type: ops.Float, Op: coll.Op{Builtin: ops.Sum}})
		if err != nil {
			return err
		}
		if err := r.Wait(); err != nil {
			return err
		}
		if _, fitted := c.Machine(); !fitted {
			return fmt.Errorf("no fit after the request")
		}
		return nil
	})
	if measured, _ := cfg.FitCounts(); measured != 4 {
		t.Errorf("%d measurements, want 4", measured)
	}
}

// A fit measures only the levels its communicator has: one rank per node
// (ranks 0 and 4) fits the network alone. So the world, which has both,
// measures again rather than agree on it, and the communicators of one
// rank per node made before the world's fit agree on the world's (it has
// what they need).
func TestFitAgreesOnlyOnWhatWasMeasured(t *testing.T) {
	tu, err := tuner.New(envvar.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &coll.Config{Tuner: tu, JobID: "fitlevels", Fit: true}
	runRanks(t, "", 8, cfg, algorithms.BlockNodeMap(8, 4), func(world *coll.Comm) error {
		r := world.Rank()
		slice, err := world.Split(r%4, r, "slice") // {0,4}, {1,5}, ...: one rank per node
		if err != nil {
			return err
		}
		defer slice.Free()
		other, err := world.Split(r%4, -r, "other") // the same, made before any fit
		if err != nil {
			return err
		}
		defer other.Free()
		if r%4 == 0 { // ranks 0 and 4 alone: the ranks of a process share what they know
			if err := sumFloats(slice, 1<<18, ""); err != nil {
				return err
			}
		}
		if err := fitCounts(world, cfg, "the slice {0, 4}", 2, 0); err != nil {
			return err
		}
		if m, fitted := slice.Machine(); r%4 == 0 && (!fitted || m.NodeAlpha != model.Default.NodeAlpha || m.NodeBeta != model.Default.NodeBeta) {
			return fmt.Errorf("one rank per node: fitted %v, %+v: want the network alone", fitted, m)
		}
		if err := sumFloats(world, 1<<18, ""); err != nil {
			return err
		}
		if err := fitCounts(world, cfg, "the world", 10, 0); err != nil {
			return err
		}
		if err := sumFloats(other, 1<<18, ""); err != nil {
			return err
		}
		if err := fitCounts(world, cfg, "the other slices", 10, 8); err != nil {
			return err
		}
		wm, _ := world.Machine()
		if om, _ := other.Machine(); om != wm {
			return fmt.Errorf("the other slice agreed on %+v, the world decides with %+v", om, wm)
		}
		return nil
	})
}
