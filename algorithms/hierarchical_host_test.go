package algorithms_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
)

// affine composes maps x -> ax+b element by element, A first: associative
// and not commutative, so a result equals the reference only if the
// contributions were combined in rank order. An element is two int64s.
func affine(dst, a, b []byte) {
	le := binary.LittleEndian
	for i := 0; i+16 <= len(dst); i += 16 {
		a1, b1 := le.Uint64(a[i:]), le.Uint64(a[i+8:])
		a2, b2 := le.Uint64(b[i:]), le.Uint64(b[i+8:])
		le.PutUint64(dst[i:], a1*a2)
		le.PutUint64(dst[i+8:], b1*a2+b2)
	}
}

// Real bytes through the host executor and the in-process transport, on
// goroutine ranks: the hierarchical algorithms on several node maps, sums
// of int64 and (where Check allows) the non-commutative affine op, in place
// and not, against a reference folded in rank order. All calls of one map
// run back to back, so a message of one call matched by another fails.
func TestHierarchicalRealData(t *testing.T) {
	maps := []nodeMap{
		{"3 nodes (2,3,1)", blocked(2, 3, 1)},
		{"3 nodes (4,4,3)", blocked(4, 4, 3)},
		{"4 nodes x 4", blocked(4, 4, 4, 4)},
		{"13 round-robin over 4", roundRobin(13, 4)},
	}
	sum, _ := ops.Lookup(ops.Sum, ops.Int64)
	for _, nm := range maps {
		t.Run(nm.name, func(t *testing.T) {
			p := nm.m.P()
			rng := rand.New(rand.NewPCG(uint64(p), 5))
			type call struct {
				c       algorithms.Collective
				params  algorithms.Params
				elem    int
				kernel  host.Kernel
				in      [][]byte // per rank
				want    [][]byte // per rank
				inPlace bool
			}
			var calls []call
			for _, c := range algorithms.Collectives {
				for _, n := range []int{0, 1, p + 1, 3000} {
					for _, comm := range []bool{true, false} {
						for _, inPlace := range []bool{false, true} {
							params := algorithms.Params{P: p, Count: n, Commutative: comm, InPlace: inPlace, Nodes: nm.m}
							if c != algorithms.Allreduce {
								params.Count, params.Counts = 0, make([]int, p)
								for i := range params.Counts {
									params.Counts[i] = n / p
									if c != algorithms.ReduceScatterBlock {
										params.Counts[i] = rng.IntN(2*n/p + 2)
									}
								}
							}
							a, _ := algorithms.Lookup(c, "hierarchical")
							if a.Check(params) != nil || (c == algorithms.Allgather && !comm) {
								continue
							}
							k := call{c: c, params: params, elem: 8, kernel: host.Kernel(sum), inPlace: inPlace}
							if !comm {
								k.elem, k.kernel = 16, affine
							}
							k.in, k.want = realData(c, params, k.elem, k.kernel, rng)
							calls = append(calls, k)
						}
					}
				}
			}
			eps := inproc.New(p)
			ranks := make([]int, p)
			for r := range ranks {
				ranks[r] = r
			}
			errs := make([]error, p)
			var wg sync.WaitGroup
			for r := range p {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var e host.Executor
					for i, k := range calls {
						pr := k.params
						pr.Rank = r
						a, _ := algorithms.Lookup(k.c, "hierarchical")
						s := a.Build(pr)
						in, out := bytes.Clone(k.in[r]), make([]byte, len(k.want[r]))
						if k.c == algorithms.ReduceScatter || k.c == algorithms.ReduceScatterBlock {
							out = make([]byte, len(k.in[r])) // room for the in-place input
						}
						if k.inPlace {
							at := 0
							if k.c == algorithms.Allgather {
								at = pr.Blocks().Displs[r] * k.elem
							}
							copy(out[at:], in)
							in = out[at : at+len(in)]
						}
						hc := &host.Call{Sched: s, In: in, Out: out, Scratch: make([]byte, s.ScratchLen*k.elem), ElemSize: k.elem, Reduce: k.kernel,
							T: eps[r], Ranks: ranks, Tag: transport.Tag{Context: 1, Seq: uint32(i + 1)}}
						if err := e.Run(hc); err != nil {
							errs[r] = fmt.Errorf("%s %s: %v", k.c, describe(pr), err)
							return
						}
						if !bytes.Equal(out[:len(k.want[r])], k.want[r]) {
							errs[r] = fmt.Errorf("%s %s: rank %d's result differs from the reference", k.c, describe(pr), r)
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, ep := range eps {
				ep.Close()
			}
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// realData returns random inputs of every rank and the output each must
// end with, the reductions folded in rank order.
func realData(c algorithms.Collective, p algorithms.Params, elem int, kernel host.Kernel, rng *rand.Rand) (in, want [][]byte) {
	n := p.Count
	if p.Counts != nil {
		n = p.Total()
	}
	in, want = make([][]byte, p.P), make([][]byte, p.P)
	for r := range in {
		m := n
		if c == algorithms.Allgather {
			m = p.Counts[r]
		}
		in[r] = make([]byte, m*elem)
		for i := range in[r] {
			in[r][i] = byte(rng.IntN(7))
		}
	}
	if c == algorithms.Allgather {
		all := bytes.Join(in, nil)
		for r := range want {
			want[r] = all
		}
		return in, want
	}
	acc := bytes.Clone(in[0])
	for r := 1; r < p.P; r++ {
		kernel(acc, acc, in[r])
	}
	for r := range want {
		want[r] = acc
		if c != algorithms.Allreduce {
			bl := p.Blocks()
			want[r] = acc[bl.Displs[r]*elem : (bl.Displs[r]+bl.Counts[r])*elem]
		}
	}
	return in, want
}
