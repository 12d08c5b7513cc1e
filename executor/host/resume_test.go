package host_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
)

// sumInt64 is the kernel of MPI_SUM on int64.
func sumInt64(dst, a, b []byte) {
	for i := 0; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(a[i:])+binary.LittleEndian.Uint64(b[i:]))
	}
}

// Progress never waits for a peer: one goroutine steps the calls of every
// rank in turn, so a Progress that blocked would hang the test, and every
// algorithm's allreduce still ends with the sum on every rank. Two calls
// (two tags) are in flight on each rank at once.
func TestProgressNeverWaits(t *testing.T) {
	const count = 1001
	for _, p := range []int{1, 2, 3, 5, 8} {
		for _, alg := range algorithms.All(algorithms.Allreduce) {
			if alg.Direct || alg.Build == nil {
				continue
			}
			eps := inproc.New(p)
			ranks := make([]int, p)
			for r := range ranks {
				ranks[r] = r
			}
			type call struct {
				c    host.Call
				e    host.Executor
				done bool
			}
			var calls []*call
			for seq := range 2 {
				for r := range p {
					par := algorithms.Params{P: p, Rank: r, Count: count, Commutative: true}
					if err := alg.Check(par); err != nil {
						continue
					}
					s := alg.Build(par)
					in := make([]byte, 8*count)
					for i := range count {
						binary.LittleEndian.PutUint64(in[8*i:], uint64(r*1000+i+seq))
					}
					x := &call{c: host.Call{Sched: s, In: in, Out: make([]byte, 8*count), Scratch: make([]byte, 8*s.ScratchLen), ElemSize: 8, Reduce: sumInt64,
						T: eps[r], Ranks: ranks, Tag: transport.Tag{Context: 1, Seq: uint32(seq)}}}
					x.e.Start(&x.c)
					calls = append(calls, x)
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for left := len(calls); left > 0; {
				for _, x := range calls {
					if x.done {
						continue
					}
					done, _, err := x.e.Progress()
					if err != nil {
						t.Fatalf("%s at p=%d: %v", alg.Name, p, err)
					}
					if done {
						x.done = true
						left--
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s at p=%d: %d calls never finished", alg.Name, p, left)
				}
			}
			for _, x := range calls {
				seq := int(x.c.Tag.Seq)
				for i := range count {
					want := uint64(0)
					for r := range p {
						want += uint64(r*1000 + i + seq)
					}
					if got := binary.LittleEndian.Uint64(x.c.Out[8*i:]); got != want {
						t.Fatalf("%s at p=%d, call %d: element %d is %d, want %d", alg.Name, p, seq, i, got, want)
					}
				}
			}
			for _, ep := range eps {
				ep.Close()
			}
		}
	}
}
