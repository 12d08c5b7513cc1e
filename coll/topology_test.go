package coll_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/tuner"
)

// lockedWriter lets the ranks of an in-process job share one debug log.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// fallbackTuner is the tuner of GOCOLL_FALLBACK=policy.
func fallbackTuner(t *testing.T, policy string) *tuner.Tuner {
	t.Helper()
	tu, err := tuner.New(envvar.Settings{Fallback: envvar.Fallback(policy)})
	if err != nil {
		t.Fatal(err)
	}
	return tu
}

// jobOnHosts runs f on len(hosts) in-process ranks, rank r on host
// hosts[r], as capi and mpi set a world up: the node map from the host
// names, and a shared segment only where every rank is on one node. A
// forced algorithm that cannot run a call fails it (GOCOLL_FALLBACK=error),
// so that a call forced to shm proves there is a segment.
func jobOnHosts(t *testing.T, hosts []string, debug *lockedWriter, f func(c *coll.Comm) error) {
	t.Helper()
	tu := fallbackTuner(t, "error")
	cfg := &coll.Config{Tuner: tu, JobID: "topo"}
	if debug != nil {
		cfg.Debug = debug
	}
	runRanks(t, "", len(hosts), cfg, algorithms.NewNodeMap(hosts), f)
}

// nodeTable writes a map as each rank's (node, local rank).
func nodeTable(m *algorithms.NodeMap) [][2]int {
	var t [][2]int
	if m == nil {
		return nil
	}
	for r := range m.P() {
		t = append(t, [2]int{m.Node(r), m.Local(r)})
	}
	return t
}

// shmSum sums v over c with the shm algorithm forced: it fails where c
// has no shared segment.
func shmSum(c *coll.Comm, v int64) (int64, error) {
	in, out := make([]byte, 8), make([]byte, 8)
	binary.LittleEndian.PutUint64(in, uint64(v))
	err := c.Allreduce(coll.Args{Send: in, Recv: out, Count: 1, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}, Algorithm: "shm"})
	return int64(binary.LittleEndian.Uint64(out)), err
}

// Six ranks placed round-robin on two hosts (a b a b a b). The world's map
// has node r%2 and local rank r/2; a split into halves with keys that
// reverse the order derives its map from the world's, renumbering nodes by
// their lowest new rank; a dup shares its parent's; SplitShared groups
// each host's ranks in key order and gives them a shared segment, which a
// call forced to shm uses, while the world, on two nodes, has none.
func TestNodeMapsOfSubCommunicators(t *testing.T) {
	hosts := []string{"a", "b", "a", "b", "a", "b"}
	debug := &lockedWriter{}
	jobOnHosts(t, hosts, debug, func(world *coll.Comm) error {
		r := world.Rank()
		if got, want := nodeTable(world.Nodes()), [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2}}; !slices.Equal(got, want) {
			return fmt.Errorf("world map %v, want %v", got, want)
		}
		if world.Shared() || world.OneNode() {
			return fmt.Errorf("world on two nodes: shared %v, one node %v", world.Shared(), world.OneNode())
		}
		// Halves {0,1,2} and {3,4,5}, each in reverse order: new ranks
		// are old 2,1,0 (hosts a b a) and 5,4,3 (hosts b a b). Either way
		// the new ranks 0 and 2 share node 0, rank 1 is node 1.
		half, err := world.Split(r/3, -r, "half")
		if err != nil {
			return err
		}
		if got, want := nodeTable(half.Nodes()), [][2]int{{0, 0}, {1, 0}, {0, 1}}; !slices.Equal(got, want) {
			return fmt.Errorf("half %v (ranks %v): map %v, want %v", r/3, half.Ranks(), got, want)
		}
		if half.Shared() {
			return fmt.Errorf("half on two nodes has a shared segment")
		}
		dup, err := half.Dup("dup")
		if err != nil {
			return err
		}
		if dup.Nodes() != half.Nodes() {
			return fmt.Errorf("dup's map %v is not its parent's %v", dup.Nodes(), half.Nodes())
		}
		// One communicator per host, in reverse rank order.
		node, err := world.SplitShared(-r, "node")
		if err != nil {
			return err
		}
		want := []int{4, 2, 0}
		if r%2 == 1 {
			want = []int{5, 3, 1}
		}
		if !slices.Equal(node.Ranks(), want) || node.Ranks()[node.Rank()] != r {
			return fmt.Errorf("SplitShared: ranks %v (me %d), want %v", node.Ranks(), node.Rank(), want)
		}
		if !node.OneNode() || node.Nodes().String() != "1 nodes x 3" || !node.Shared() {
			return fmt.Errorf("SplitShared: map %v, one node %v, shared segment %v", node.Nodes(), node.OneNode(), node.Shared())
		}
		for i := range 3 {
			s, err := shmSum(node, int64(r+i))
			if err != nil {
				return fmt.Errorf("shm allreduce on the node communicator: %w", err)
			}
			if w := int64(want[0] + want[1] + want[2] + 3*i); s != w {
				return fmt.Errorf("shm allreduce on the node communicator: %d, want %d", s, w)
			}
			// Interleaved with the world's, which runs over the transport.
			if s, err := sumInt64(world, 1); err != nil || s != 6 {
				return fmt.Errorf("world allreduce: %d %v", s, err)
			}
		}
		if _, err := shmSum(world, 1); err == nil {
			return fmt.Errorf("shm forced on the two-node world ran")
		}
		// A split of the node communicator keeps one node and inherits a
		// segment from its parent's.
		sub, err := node.Split(node.Rank()%2, 0, "sub")
		if err != nil {
			return err
		}
		if !sub.OneNode() || !sub.Shared() {
			return fmt.Errorf("split of a node communicator: map %v, shared %v", sub.Nodes(), sub.Shared())
		}
		// MPI_UNDEFINED takes part in the collective and joins nothing.
		none, err := world.SplitType(false, 0, "none")
		if err != nil || none != nil {
			return fmt.Errorf("SplitType(undefined): %v %v", none, err)
		}
		for _, c := range []*coll.Comm{sub, node, dup, half} {
			c.Free()
		}
		return nil
	})
	log := debug.String()
	for _, want := range []string{
		"gocoll: rank 0: MPI_COMM_WORLD: p=6 on 2 nodes x 3 (this rank: node 0, local rank 0)",
		"gocoll: rank 2: half: p=3 on 2 nodes (2,1) (this rank: node 0, local rank 1)",
		"gocoll: rank 1: node: p=3 on 1 nodes x 3 (this rank: node 0, local rank 1)",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("GOCOLL_DEBUG lacks %q:\n%s", want, log)
		}
	}
}

// Uneven nodes (a a a b): SplitShared gives sizes 3 and 1, the larger
// with a segment; a communicator without a map (none set) counts every
// rank as a node of its own; a map of the wrong size is refused.
func TestSplitSharedUnevenAndUnknown(t *testing.T) {
	jobOnHosts(t, []string{"a", "a", "b", "a"}, nil, func(world *coll.Comm) error {
		r := world.Rank()
		node, err := world.SplitShared(0, "node")
		if err != nil {
			return err
		}
		want := []int{0, 1, 3}
		if r == 2 {
			want = []int{2}
		}
		if !slices.Equal(node.Ranks(), want) {
			return fmt.Errorf("SplitShared: ranks %v, want %v", node.Ranks(), want)
		}
		if node.Shared() != (r != 2) {
			return fmt.Errorf("SplitShared of %v: shared segment %v", want, node.Shared())
		}
		if r != 2 {
			if s, err := shmSum(node, 1); err != nil || s != 3 {
				return fmt.Errorf("shm allreduce: %d %v", s, err)
			}
		}
		if err := world.SetNodes(algorithms.NewNodeMap([]string{"a"})); err == nil {
			return fmt.Errorf("a one-rank map accepted for four ranks")
		}
		return nil
	})
	job(t, 3, func(world *coll.Comm) error {
		if world.Nodes() != nil {
			return fmt.Errorf("a map nobody set: %v", world.Nodes())
		}
		alone, err := world.SplitShared(0, "alone")
		if err != nil {
			return err
		}
		if alone.Size() != 1 || alone.Nodes() != nil {
			return fmt.Errorf("SplitShared without a map: size %d, map %v", alone.Size(), alone.Nodes())
		}
		return nil
	})
}
