//go:build linux

package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/intranode"
	"github.com/gocoll/gocoll/intranode/intranodetest"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/ops/mpichabi"
)

// onRanks attaches p goroutine ranks to one segment and runs f on each,
// with the rank's Go group and its C view of the segment.
// A check that fails records it and goes on, so that the rank keeps
// taking the steps the others wait for.
func onRanks(t *testing.T, p int, f func(g *intranode.Group, v *view, fail func(string, ...any)) error) {
	t.Helper()
	onRanksWith(t, p, intranode.Options{JobID: "enginetest", Slot: 4096}, f)
}

// onRanksWith is onRanks with the groups' options.
func onRanksWith(t *testing.T, p int, o intranode.Options, f func(g *intranode.Group, v *view, fail func(string, ...any)) error) {
	t.Helper()
	x := intranodetest.NewExchange(p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := intranode.Attach(x.Rank(r), r, p, o)
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close()
			fails := 0
			errs[r] = f(g, newView(g.Layout()), func(format string, a ...any) {
				if fails++; fails <= 5 {
					t.Errorf("rank %d: "+format, append([]any{r}, a...)...)
				}
			})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// handles are the MPICH handles of the types the tests use.
var handles = map[ops.Type]uint32{}

func init() {
	for h, t := range mpichabi.Types {
		handles[t] = h
	}
}

// fill writes n elements of t, finite and varied (negative, signed zeros),
// for rank r and round i.
func fill(buf []byte, t ops.Type, r, i int) {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(i)))
	size := t.Size()
	for at := 0; at+size <= len(buf); at += size {
		v := rng.IntN(41) - 20
		switch t.Scalar() {
		case "f32":
			f := float32(v) / 4
			if v == 0 && rng.IntN(2) == 0 {
				f = float32(math.Copysign(0, -1))
			}
			binary.LittleEndian.PutUint32(buf[at:], math.Float32bits(f))
		case "f64":
			f := float64(v) / 8
			if v == 0 && rng.IntN(2) == 0 {
				f = math.Copysign(0, -1)
			}
			binary.LittleEndian.PutUint64(buf[at:], math.Float64bits(f))
		default:
			for j := range size {
				buf[at+j] = byte(rng.Uint32())
			}
		}
	}
}

var reduceTypes = []ops.Type{ops.Int, ops.Unsigned, ops.Long, ops.UnsignedLong, ops.Float, ops.Double,
	ops.Short, ops.UnsignedShort, ops.SignedChar, ops.UnsignedChar, ops.Integer, ops.Real8}
var reduceOps = []ops.Op{ops.Sum, ops.Prod, ops.Max, ops.Min}

// The generated tables decode every MPICH handle as package ops and
// mpichabi do: a type's size, whether the C kernels reduce it, an op's code.
func TestGeneratedTables(t *testing.T) {
	for h, typ := range mpichabi.Types {
		size, kind := mpichType(h)
		want := typ.Size()
		if typ.Class() == ops.ClassPair {
			want = 0
		}
		if size != want {
			t.Errorf("%v (%#x): size %d, want %d", typ, h, size, want)
		}
		reduces := typ.Scalar() != ""
		if (kind != 0) != reduces || typeKind(int(typ)) != kind {
			t.Errorf("%v: C kind %d (by ops.Type %d), scalar %q", typ, kind, typeKind(int(typ)), typ.Scalar())
		}
	}
	for h, op := range mpichabi.Ops {
		want := 0
		if op == ops.Sum || op == ops.Prod || op == ops.Max || op == ops.Min {
			want = int(op)
		}
		if got := mpichOp(h); got != want {
			t.Errorf("%v: op %d, want %d", op, got, want)
		}
	}
}

// The C half's allreduce and reduce_scatter (with counts: uneven, zero,
// and _block's equal ones; in place and not) give exactly the Go half's
// results, on the same segment, call after call.
func TestReductionsMatchGo(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4} {
		countSets := [][]int{make([]int, p), make([]int, p), make([]int, p), make([]int, p)}
		for q := range p {
			countSets[0][q] = 3               // equal (_block)
			countSets[1][q] = (q*5 + 1) % 4   // uneven, a zero at q = 3
			countSets[2][q] = 0               // all zero but one
			countSets[3][q] = 1 + (q%2)*(q+6) // uneven, larger
		}
		countSets[2][p-1] = 2
		onRanks(t, p, func(g *intranode.Group, v *view, fail func(string, ...any)) error {
			r := g.Rank()
			round := 0
			for _, typ := range reduceTypes {
				size, kind := mpichType(handles[typ])
				for _, op := range reduceOps {
					red, err := ops.ReductionOf(op, typ)
					if err != nil {
						return err
					}
					code := int(op) // the generated op codes are package ops' (TestGeneratedTables)
					for _, n := range []int{1, 7, 64} {
						round++
						in := make([]byte, n*size)
						fill(in, typ, r, round)
						want, got := make([]byte, len(in)), make([]byte, len(in))
						if err := g.Allreduce(in, want, red); err != nil {
							return err
						}
						if rc := v.allreduce(in, got, n, kind, size, code); rc != 0 {
							fail("allreduce %v %v n=%d: rc %d", typ, op, n, rc)
						}
						if !bytes.Equal(got, want) {
							fail("allreduce %v %v n=%d: C %x, Go %x", typ, op, n, got, want)
						}
						copy(got, in)
						if rc := v.allreduce(nil, got, n, kind, size, code); rc != 0 || !bytes.Equal(got, want) {
							fail("in-place allreduce %v %v n=%d: rc %d, C %x, Go %x", typ, op, n, rc, got, want)
						}
					}
					for ci, counts := range countSets {
						round++
						total := 0
						c32 := make([]int32, p)
						for q, c := range counts {
							total += c
							c32[q] = int32(c)
						}
						in := make([]byte, total*size)
						fill(in, typ, r, round)
						mine := counts[r] * size
						want, got := make([]byte, mine), make([]byte, mine)
						if err := g.ReduceScatter(in, want, counts, red); err != nil {
							return err
						}
						if rc := v.reduceScatter(in, got, c32, 0, kind, size, code); rc != 0 || !bytes.Equal(got, want) {
							fail("reduce_scatter %v %v counts %v: rc %d, C %x, Go %x", typ, op, counts, rc, got, want)
						}
						inout := append([]byte(nil), in...)
						if rc := v.reduceScatter(nil, inout, c32, 0, kind, size, code); rc != 0 || !bytes.Equal(inout[:mine], want) {
							fail("in-place reduce_scatter %v %v counts %v: rc %d, C %x, Go %x", typ, op, counts, rc, inout[:mine], want)
						}
						if ci == 0 {
							if rc := v.reduceScatter(in, got, nil, counts[0], kind, size, code); rc != 0 || !bytes.Equal(got, want) {
								fail("reduce_scatter_block %v %v: rc %d, C %x, Go %x", typ, op, rc, got, want)
							}
						}
					}
				}
			}
			return nil
		})
	}
}

// Allgather of any predefined type is a copy: the C half's (in place and
// not) equals the Go half's for one-byte, two-byte and odd-sized blocks;
// bcast from every root equals the Go half's; barriers interleave.
func TestCopiesMatchGo(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4} {
		onRanks(t, p, func(g *intranode.Group, v *view, fail func(string, ...any)) error {
			r := g.Rank()
			round := 0
			for _, typ := range []ops.Type{ops.Char, ops.Byte, ops.Short, ops.Character, ops.LongDouble, ops.CDoubleComplex} {
				size, _ := mpichType(handles[typ])
				if size != typ.Size() {
					fail("%v: size %d", typ, size)
				}
				for _, n := range []int{1, 3, 100} {
					round++
					in := make([]byte, n*size)
					fill(in, ops.Byte, r, round)
					want, got := make([]byte, p*len(in)), make([]byte, p*len(in))
					counts := make([]int, p)
					for q := range counts {
						counts[q] = n
					}
					if err := g.Allgather(in, want, counts, size); err != nil {
						return err
					}
					if rc := v.allgather(in, got, len(in)); rc != 0 || !bytes.Equal(got, want) {
						fail("allgather %v n=%d: rc %d", typ, n, rc)
					}
					clear(got)
					copy(got[r*len(in):], in)
					if rc := v.allgather(nil, got, len(in)); rc != 0 || !bytes.Equal(got, want) {
						fail("in-place allgather %v n=%d: rc %d", typ, n, rc)
					}
					if rc := v.barrier(); rc != 0 {
						fail("barrier: rc %d", rc)
					}
				}
			}
			for root := range p {
				for _, n := range []int{1, 13, 4000} {
					round++
					want, got := make([]byte, n), make([]byte, n)
					if r == root {
						fill(want, ops.Byte, root, round)
						copy(got, want)
					}
					if err := g.Bcast(want, root); err != nil {
						return err
					}
					if rc := v.bcast(got, root); rc != 0 || !bytes.Equal(got, want) {
						fail("bcast of %d bytes from %d: rc %d", n, root, rc)
					}
				}
			}
			// Too large for one step: declined, and no step taken (the
			// next call still meets the others).
			if rc := v.bcast(make([]byte, 5000), 0); rc != Decline {
				fail("bcast of 5000 bytes on 4096-byte slots: rc %d, want Decline", rc)
			}
			big := make([]int32, p)
			big[0] = 4096/int32(p)/4 + 1
			if rc := v.reduceScatter(make([]byte, 4*int(big[0])), make([]byte, 4*int(big[0])), big, 0, 5, 4, 1); rc != Decline {
				fail("reduce_scatter with a block over a slot's share: rc %d, want Decline", rc)
			}
			return g.Barrier()
		})
	}
}

// association fills buf with elements of t whose sum (or product) depends
// on the association: random signs and fractions, exponents spread over
// 2^-10 .. 2^10 (sums) or near one (products), finite at p <= 8.
func association(buf []byte, t ops.Type, op ops.Op, rng *rand.Rand) {
	part := map[ops.Type]int{ops.Complex4: 2, ops.CFloatComplex: 4, ops.CDoubleComplex: 8}[t]
	if part == 0 {
		part = t.Size()
	}
	spread := 10
	if op == ops.Prod {
		spread = 1
	}
	e := func() int { return rng.IntN(2*spread+1) - spread } // unbiased exponent
	sign := func() uint64 { return uint64(rng.IntN(2)) }
	for at := 0; at+part <= len(buf); at += part {
		switch {
		case part == 8:
			binary.LittleEndian.PutUint64(buf[at:], sign()<<63|uint64(1023+e())<<52|rng.Uint64()>>12)
		case part == 4:
			binary.LittleEndian.PutUint32(buf[at:], uint32(sign()<<31|uint64(127+e())<<23|rng.Uint64()>>41))
		case t == ops.BFloat16:
			binary.LittleEndian.PutUint16(buf[at:], uint16(sign()<<15|uint64(127+e())<<7|rng.Uint64()>>57))
		default: // binary16
			binary.LittleEndian.PutUint16(buf[at:], uint16(sign()<<15|uint64(15+e())<<10|rng.Uint64()>>54))
		}
	}
}

// Both halves combine the p contributions in the canonical association,
// bit for bit ops.CanonicalReduce's, for p = 1..8, at counts around the
// C half's chunks, the Go half's slot and its chunked path, in place and
// not; 16-bit floats (Go half only: the C half declines them) accumulate
// in float32 and round once.
func TestCanonical(t *testing.T) {
	SetCanonical(true) // as GOCOLL_REPRODUCIBLE=1 sets it
	defer SetCanonical(false)
	types := []ops.Type{ops.Double, ops.Float, ops.CDoubleComplex, ops.CFloatComplex, ops.Float16, ops.BFloat16, ops.Complex4}
	for p := 1; p <= 8; p++ {
		onRanks(t, p, func(g *intranode.Group, v *view, fail func(string, ...any)) error {
			r := g.Rank()
			round := 0
			for _, typ := range types {
				size, kind := mpichType(handles[typ])
				for _, op := range []ops.Op{ops.Sum, ops.Prod} {
					red, err := ops.ReductionOf(op, typ)
					if err != nil {
						return err
					}
					slot := g.Slot() / size
					for _, n := range []int{1, 3, 512/size - 1, 512/size + 1, 4096 / size, slot + 1, 3*slot + 5} {
						round++
						parts := make([][]byte, p)
						for q := range parts {
							parts[q] = make([]byte, n*size)
							association(parts[q], typ, op, rand.New(rand.NewPCG(uint64(q), uint64(round))))
						}
						want := make([]byte, n*size)
						if err := ops.CanonicalReduce(op, typ, want, parts); err != nil {
							return err
						}
						in := parts[r]
						got := make([]byte, len(in))
						if err := g.Allreduce(in, got, red); err != nil {
							return err
						}
						if !bytes.Equal(got, want) {
							fail("Go allreduce %v %v n=%d differs from T(0, %d)", typ, op, n, p)
						}
						inout := bytes.Clone(in)
						if err := g.Allreduce(inout, inout, red); err != nil {
							return err
						}
						if !bytes.Equal(inout, want) {
							fail("Go in-place allreduce %v %v n=%d differs from T(0, %d)", typ, op, n, p)
						}
						// reduce_scatter_block of the whole vector, n elements a block.
						all := make([]byte, 0, p*len(in))
						for range p {
							all = append(all, in...)
						}
						counts := make([]int, p)
						for q := range counts {
							counts[q] = n
						}
						mine := make([]byte, len(in))
						if err := g.ReduceScatter(all, mine, counts, red); err != nil {
							return err
						}
						if !bytes.Equal(mine, want) {
							fail("Go reduce_scatter %v %v n=%d differs from T(0, %d)", typ, op, n, p)
						}
						if kind == 0 || len(in) > 4096 {
							continue // not the C half's
						}
						clear(got)
						if rc := v.allreduce(in, got, n, kind, size, int(op)); rc != 0 || !bytes.Equal(got, want) {
							fail("C allreduce %v %v n=%d: rc %d, differs from T(0, %d)", typ, op, n, rc, p)
						}
						if n*p*size <= 4096 && n <= g.Slot()/p/size {
							clear(mine)
							c32 := make([]int32, p)
							for q := range c32 {
								c32[q] = int32(n)
							}
							if rc := v.reduceScatter(all, mine, c32, 0, kind, size, int(op)); rc != 0 || !bytes.Equal(mine, want) {
								fail("C reduce_scatter %v %v n=%d: rc %d, differs from T(0, %d)", typ, op, n, rc, p)
							}
						}
					}
				}
			}
			return nil
		})
	}
}

// On a segment of the default size classes (intranode.Steps), the C half
// takes what the Go half does in one step, up to its own limit, with the
// Go half's bits and layout, and declines the rest without taking a
// step: allreduce up to OneStep (and GOCOLL_SHM_MAX), reduce_scatter
// whose blocks fit a piece, allgather below the CMA threshold (the Go
// half reads longer blocks with CMA where it can).
func TestSizeClassesMatchGo(t *testing.T) {
	for _, p := range []int{1, 2, 3} {
		onRanksWith(t, p, intranode.Options{JobID: "enginetest"}, func(g *intranode.Group, v *view, fail func(string, ...any)) error {
			r, steps, cmaMin := g.Rank(), g.Steps(), g.CMAMin()
			round := 0
			for _, typ := range []ops.Type{ops.Float, ops.Double, ops.Int} {
				size, kind := mpichType(handles[typ])
				for _, op := range []ops.Op{ops.Sum, ops.Max} {
					red, err := ops.ReductionOf(op, typ)
					if err != nil {
						return err
					}
					red = red.Folded()
					for _, n := range []int{4096 + size, 64 << 10, steps.OneStep, steps.OneStep + size} {
						round++
						in := make([]byte, n)
						fill(in, typ, r, round)
						want, got := make([]byte, n), make([]byte, n)
						if err := g.Allreduce(in, want, red); err != nil {
							return err
						}
						rc := v.allreduce(in, got, n/size, kind, size, int(op))
						if n > steps.OneStep {
							if rc != Decline {
								fail("allreduce %v %v of %d bytes over OneStep: rc %d, want Decline", typ, op, n, rc)
							}
							continue
						}
						if rc != 0 || !bytes.Equal(got, want) {
							fail("allreduce %v %v of %d bytes: rc %d, differs from Go: %v", typ, op, n, rc, !bytes.Equal(got, want))
						}
					}
					for _, block := range []int{1 << 10, 40 << 10} {
						round++
						counts, c32 := make([]int, p), make([]int32, p)
						for q := range counts {
							counts[q], c32[q] = block/size, int32(block/size)
						}
						in := make([]byte, p*block)
						fill(in, typ, r, round)
						want, got := make([]byte, block), make([]byte, block)
						if err := g.ReduceScatter(in, want, counts, red); err != nil {
							return err
						}
						rc := v.reduceScatter(in, got, c32, 0, kind, size, int(op))
						if p*block > 128<<10 {
							if rc != Decline {
								fail("reduce_scatter of %d bytes over GOCOLL_SHM_MAX: rc %d, want Decline", p*block, rc)
							}
							continue
						}
						if rc != 0 || !bytes.Equal(got, want) {
							fail("reduce_scatter %v %v of %d-byte blocks: rc %d, differs from Go: %v", typ, op, block, rc, !bytes.Equal(got, want))
						}
					}
				}
			}
			for _, block := range []int{16 << 10, intranode.CMAMin - 1, intranode.CMAMin, 100 << 10} {
				round++
				in := make([]byte, block)
				fill(in, ops.Byte, r, round)
				counts := make([]int, p)
				for q := range counts {
					counts[q] = block
				}
				want, got := make([]byte, p*block), make([]byte, p*block)
				if err := g.Allgather(in, want, counts, 1); err != nil {
					return err
				}
				rc := v.allgather(in, got, block)
				if cmaMin > 0 && block >= cmaMin || p*block > 512<<10 {
					if rc != Decline {
						fail("allgather of %d-byte blocks, CMA from %d: rc %d, want Decline", block, cmaMin, rc)
					}
					continue
				}
				if rc != 0 || !bytes.Equal(got, want) {
					fail("allgather of %d-byte blocks: rc %d, differs from Go: %v", block, rc, !bytes.Equal(got, want))
				}
			}
			return g.Barrier()
		})
	}
}

// Ranks whose calls go to different halves meet: for every call, half
// the ranks (alternating by round) make it in C, going to Go where C
// declines (as the C ABI does), the others in Go, on one segment; every
// rank gets the result of the call made in Go by all, around the sizes
// where the data starts moving around the slot (intranode's placed) and
// the steps' limits, call after call (the data's place moves), on a
// default segment and on one with a set slot.
func TestHalvesMeet(t *testing.T) {
	for _, o := range []intranode.Options{{JobID: "enginetest"}, {JobID: "enginetest", Slot: 64 << 10}} {
		for _, p := range []int{2, 3} {
			onRanksWith(t, p, o, func(g *intranode.Group, v *view, fail func(string, ...any)) error {
				r, round := g.Rank(), 0
				inC := func() bool { return (r+round)%2 == 0 }
				size, kind := mpichType(handles[ops.Double])
				red, _ := ops.ReductionOf(ops.Sum, ops.Double)
				red = red.Folded()
				for _, n := range []int{8, 4096, 16 << 10, 20 << 10, 64 << 10, 128 << 10} {
					round++
					in := make([]byte, n)
					fill(in, ops.Double, r, round)
					want := make([]byte, n)
					if err := g.Allreduce(in, want, red); err != nil {
						return err
					}
					for range 4 {
						round++
						got := make([]byte, n)
						if !inC() || v.allreduce(in, got, n/size, kind, size, int(ops.Sum)) == Decline {
							if err := g.Allreduce(in, got, red); err != nil {
								return err
							}
						}
						if !bytes.Equal(got, want) {
							fail("allreduce of %d bytes, round %d (C: %v): differs", n, round, inC())
						}
					}
					// reduce_scatter_block of n bytes a block
					blk := n / p / size * size
					if blk == 0 {
						continue
					}
					all := make([]byte, p*blk)
					fill(all, ops.Double, r, round)
					counts, c32 := make([]int, p), make([]int32, p)
					for q := range counts {
						counts[q], c32[q] = blk/size, int32(blk/size)
					}
					wantRS := make([]byte, blk)
					if err := g.ReduceScatter(all, wantRS, counts, red); err != nil {
						return err
					}
					for range 4 {
						round++
						got := make([]byte, blk)
						if !inC() || v.reduceScatter(all, got, c32, 0, kind, size, int(ops.Sum)) == Decline {
							if err := g.ReduceScatter(all, got, counts, red); err != nil {
								return err
							}
						}
						if !bytes.Equal(got, wantRS) {
							fail("reduce_scatter of %d-byte blocks, round %d (C: %v): differs", blk, round, inC())
						}
					}
				}
				for _, n := range []int{8, 4096, 16 << 10, 20 << 10, 31 << 10, 100 << 10} {
					round++
					in := make([]byte, n)
					fill(in, ops.Byte, r, round)
					counts := make([]int, p)
					for q := range counts {
						counts[q] = n
					}
					want := make([]byte, p*n)
					if err := g.Allgather(in, want, counts, 1); err != nil {
						return err
					}
					for range 4 {
						round++
						got := make([]byte, p*n)
						if !inC() || v.allgather(in, got, n) == Decline {
							if err := g.Allgather(in, got, counts, 1); err != nil {
								return err
							}
						}
						if !bytes.Equal(got, want) {
							fail("allgather of %d-byte blocks, round %d (C: %v): differs", n, round, inC())
						}
					}
					for range 4 {
						round++
						root := round % p
						buf := make([]byte, n)
						if r == root {
							copy(buf, in)
						}
						if !inC() || v.bcast(buf, root) == Decline {
							if err := g.Bcast(buf, root); err != nil {
								return err
							}
						}
						if !bytes.Equal(buf, want[root*n:(root+1)*n]) {
							fail("bcast of %d bytes from %d, round %d (C: %v): differs", n, root, round, inC())
						}
					}
				}
				return g.Barrier()
			})
		}
	}
}

// The C half's reduce_scatter and bcast leave a step in which they read
// nothing without waiting, and wait before writing their slot again, as
// the Go half does: rank 0 (empty blocks, the bcasts' root) runs ahead
// in C while rank 1 reduces slowly in Go, and rank 1's results are right.
func TestQuietStepsRunAhead(t *testing.T) {
	size, kind := mpichType(handles[ops.Double])
	sum, _ := ops.Lookup(ops.Sum, ops.Double)
	slow := ops.UserReduction(func(dst, a, b []byte) {
		time.Sleep(200 * time.Microsecond)
		sum(dst, a, b)
	}, size)
	onRanksWith(t, 2, intranode.Options{JobID: "enginetest"}, func(g *intranode.Group, v *view, fail func(string, ...any)) error {
		r := g.Rank()
		for call := range 20 {
			n := 40 + call
			ins := [2][]byte{make([]byte, n*size), make([]byte, n*size)}
			for q := range ins {
				fill(ins[q], ops.Double, q, call)
			}
			want := make([]byte, n*size)
			sum(want, ins[0], ins[1])
			if r == 0 {
				if rc := v.reduceScatter(ins[0], nil, []int32{0, int32(n)}, 0, kind, size, int(ops.Sum)); rc != 0 {
					fail("call %d: C reduce_scatter: rc %d", call, rc)
				}
				if rc := v.bcast(bytes.Clone(ins[0]), 0); rc != 0 {
					fail("call %d: C bcast: rc %d", call, rc)
				}
				continue
			}
			out := make([]byte, n*size)
			if err := g.ReduceScatter(ins[1], out, []int{0, n}, slow); err != nil {
				return err
			}
			if !bytes.Equal(out, want) {
				fail("call %d: reduce_scatter differs", call)
			}
			b := make([]byte, n*size)
			if err := g.Bcast(b, 0); err != nil {
				return err
			}
			if !bytes.Equal(b, ins[0]) {
				fail("call %d: bcast differs", call)
			}
		}
		return g.Barrier()
	})
}
