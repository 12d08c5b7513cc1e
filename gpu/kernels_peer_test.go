package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// The names round-trip, are distinct from the pairwise kernels', and
// exist for the same ops and types.
func TestPeerKernelNames(t *testing.T) {
	seen := map[string]bool{}
	for _, vec := range []bool{false, true} {
		for _, op := range gpu.ReduceOps {
			for _, e := range gpu.Elems {
				name := gpu.PeerKernel(op, e, vec)
				if name == "" || seen[name] || name == gpu.KernelName(op, e) {
					t.Errorf("%v %v %v: %q", op, e, vec, name)
				}
				seen[name] = true
				o, el, v, ok := gpu.ParsePeerKernel(name)
				if !ok || o != op || el != e || v != vec {
					t.Errorf("ParsePeerKernel(%s) = %v %v %v %v", name, o, el, v, ok)
				}
				if _, _, ok := gpu.ParseKernelName(name); ok {
					t.Errorf("ParseKernelName takes %s", name)
				}
			}
		}
	}
	if gpu.PeerKernel(ops.Band, gpu.S32, false) != "" || gpu.PeerKernel(ops.Sum, gpu.ElemNone, true) != "" {
		t.Error("a peer kernel for MPI_BAND, or for no type")
	}
	if _, _, _, ok := gpu.ParsePeerKernel("gocoll_sum_f32"); ok {
		t.Error("ParsePeerKernel takes a pairwise kernel")
	}
	if !gpu.PeerVectorAligned(0x1000, 0x2010) || gpu.PeerVectorAligned(0x1000, 0x2008) {
		t.Error("PeerVectorAligned")
	}
}

// Every peer entry takes the five .u64 parameters the callers pass
// (dsts, ndst, srcs, p, n) and loads each; uses no local memory, no
// non-coherent loads (a destination may be a source) and no fused or
// unrounded float arithmetic; the vector entries move 16 bytes at a time
// and the scalar ones never do.
func TestPeerPTXWellFormed(t *testing.T) {
	entries, err := fake.ParsePTX(gpu.PTX())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]fake.Entry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	vector := regexp.MustCompile(`\b(ld|st)\.global\.v[24]\.`)
	float := regexp.MustCompile(`\b(add|mul|sub)\.(f32|f64)\b|\b(fma|mad)\.[a-z.]*f(32|64)\b`)
	for _, vec := range []bool{false, true} {
		for _, op := range gpu.ReduceOps {
			for _, el := range gpu.Elems {
				name := gpu.PeerKernel(op, el, vec)
				e, ok := byName[name]
				if !ok {
					t.Errorf("no entry %s", name)
					continue
				}
				if len(e.Params) != 5 {
					t.Errorf("%s: %d parameters, want 5 (dsts, ndst, srcs, p, n)", name, len(e.Params))
					continue
				}
				body := strings.Join(e.Body, "\n")
				for i, p := range e.Params {
					if p.Type != ".u64" || p.Name != fmt.Sprintf("%s_param_%d", name, i) {
						t.Errorf("%s: parameter %d is %s %s", name, i, p.Type, p.Name)
					}
					if !strings.Contains(body, "ld.param.u64 \t%rd"+fmt.Sprint(i+1)+", ["+p.Name+"];") {
						t.Errorf("%s: parameter %d is not loaded into %%rd%d", name, i, i+1)
					}
				}
				for _, bad := range []string{".local", "ld.global.nc", "fma.", "call", "trap"} {
					if strings.Contains(body, bad) {
						t.Errorf("%s: %q", name, bad)
					}
				}
				if float.MatchString(body) {
					t.Errorf("%s: float arithmetic without explicit rounding (could be contracted): %s", name, float.FindString(body))
				}
				if got := vector.MatchString(body); got != vec {
					t.Errorf("%s: vector accesses %v, want %v", name, got, vec)
				}
			}
		}
	}
}

// peerCase is one run of a peer kernel: p sources and ndst
// destinations of n elements, laid out at the given misalignment (0 for
// the vector variant, which needs 16-byte alignment).
type peerCase struct {
	p, n, ndst  int
	grid, block int
	skew        int  // bytes past 16-byte alignment of each buffer (a multiple of the element size)
	alias       bool // destination 0 is source p-1 (in place)
}

// peerInputs returns p sources of n elements of e: special values
// (zeros, NaNs with payloads, infinities, extremes, ties) among
// ordinary values of several magnitudes, whose sums and products round
// differently in different associations. Specials go to every third
// element only, so that the others stay finite however many sources
// there are.
func peerInputs(e gpu.Elem, p, n int, rng *rand.Rand) [][]byte {
	size := e.Size()
	sp := specials(e)
	srcs := make([][]byte, p)
	for q := range srcs {
		srcs[q] = make([]byte, n*size)
		for i := range n {
			var v uint64
			switch r := rng.IntN(8); {
			case r < 2 && i%3 == 0:
				v = sp[rng.IntN(len(sp))]
			case r == 1 && q > 0:
				v = get(srcs[q-1][i*size:], size) // equal operands
			default:
				v = ordinary(e, rng)
			}
			put(srcs[q][i*size:], v, size)
		}
	}
	return srcs
}

// ordinary returns a finite value of e with a random significand and a
// small exponent (or random integer bits).
func ordinary(e gpu.Elem, rng *rand.Rand) uint64 {
	sign := func(bits uint) uint64 { return uint64(rng.IntN(2)) << (bits - 1) }
	switch e {
	case gpu.F16:
		return sign(16) | uint64(15+rng.IntN(9)-4)<<10 | rng.Uint64N(1<<10)
	case gpu.BF16:
		return sign(16) | uint64(127+rng.IntN(17)-8)<<7 | rng.Uint64N(1<<7)
	case gpu.F32:
		return sign(32) | uint64(127+rng.IntN(41)-20)<<23 | rng.Uint64N(1<<23)
	case gpu.F64:
		return sign(64) | uint64(1023+rng.IntN(81)-40)<<52 | rng.Uint64N(1<<52)
	}
	return rng.Uint64()
}

// runPeer runs kernel e on copies of the case's sources and returns the
// sources and the destinations as the kernel left them, each n elements
// plus a canary element (destination 0 is source p-1 when c.alias).
func runPeer(t *testing.T, e fake.Entry, el gpu.Elem, c peerCase, srcs [][]byte) (ins, outs [][]byte) {
	t.Helper()
	size := el.Size()
	const dstsAt, srcsAt, srcBase, dstBase = 0x1000_0000, 0x1100_0000, 0x2000_0000, 0x4000_0000
	dsts, ptrs := make([]byte, 8*c.ndst), make([]byte, 8*c.p)
	m := newMachine(e, dstsAt, uint64(c.ndst), srcsAt, uint64(c.p), uint64(c.n))
	m.addBuffer(dstsAt, dsts)
	m.addBuffer(srcsAt, ptrs)
	canaried := func(data []byte) []byte {
		b := make([]byte, (c.n+1)*size)
		for i := range b {
			b[i] = 0xA5 // the canary past n, and what a missed element would keep
		}
		copy(b, data)
		return b
	}
	ins = make([][]byte, c.p)
	for q := range c.p {
		addr := uint64(srcBase + q*0x10000 + c.skew)
		ins[q] = canaried(srcs[q])
		binary.LittleEndian.PutUint64(ptrs[8*q:], addr)
		m.addBuffer(addr, ins[q])
	}
	outs = make([][]byte, c.ndst)
	for d := range outs {
		addr := uint64(dstBase + d*0x10000 + c.skew)
		if d == 0 && c.alias {
			addr, outs[d] = binary.LittleEndian.Uint64(ptrs[8*(c.p-1):]), ins[c.p-1]
		} else {
			outs[d] = canaried(nil)
			m.addBuffer(addr, outs[d])
		}
		binary.LittleEndian.PutUint64(dsts[8*d:], addr)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s %+v: %v", e.Name, c, r)
			}
		}()
		m.grid(c.grid, c.block)
	}()
	return ins, outs
}

// Every peer kernel, scalar and vector, computes package ops' canonical
// reduction T(0, p) bit for bit (but for the payload of a NaN a sum or
// product makes; p = 1 is an exact copy), for p = 1..9 and 64, element counts around the vector
// sizes, one to three destinations (one of them a source), on grids
// smaller and larger than the work; the elements past n and the sources
// are left alone.
func TestPeerPTXSemantics(t *testing.T) {
	entries, err := fake.ParsePTX(gpu.PTX())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ps := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 64}
	ns := []int{0, 1, 3, 4, 5, 7, 8, 9, 33}
	if testing.Short() {
		ps, ns = []int{1, 3, 5, 8, 9}, []int{0, 1, 5, 9, 33}
	}
	ran := 0
	for _, e := range entries {
		op, el, vec, ok := gpu.ParsePeerKernel(e.Name)
		if !ok {
			continue
		}
		size := el.Size()
		for k, p := range ps {
			for j, n := range ns {
				c := peerCase{p: p, n: n, ndst: 1 + (k+j)%3, grid: 1 + j%3, block: 1 + (k+2*j)%4}
				if !vec {
					c.skew = size * ((k + j) % (16 / size)) // aligned to the element only
				}
				c.alias = (k+j)%4 == 1
				srcs := peerInputs(el, p, n, rng)
				want := make([]byte, n*size)
				if err := ops.CanonicalReduce(op, hostTypes[el], want, srcs); err != nil {
					t.Fatal(err)
				}
				keep := srcs
				ins, outs := runPeer(t, e, el, c, srcs)
				ran++
				for q := range ins {
					if string(ins[q][:n*size]) != string(srcs[q]) && !(c.alias && q == p-1) {
						t.Fatalf("%s %+v: source %d changed", e.Name, c, q)
					}
				}
			check:
				for d, out := range outs {
					for i := range n {
						g, w := get(out[i*size:], size), get(want[i*size:], size)
						if g == w || (op == ops.Sum || op == ops.Prod) && p > 1 && isNaN(el, g) && isNaN(el, w) {
							continue // p = 1 is a copy, payloads and all
						}
						var xs []string
						for q := range p {
							xs = append(xs, fmt.Sprintf("%#x", get(keep[q][i*size:], size)))
						}
						t.Errorf("%s %+v: destination %d, element %d: %#x, want %#x; sources %v", e.Name, c, d, i, g, w, xs)
						break check
					}
					if canary := out[n*size:]; strings.Trim(string(canary), "\xa5") != "" {
						t.Errorf("%s %+v: destination %d written past n: % x", e.Name, c, d, canary)
					}
				}
			}
		}
	}
	if want := len(ps) * len(ns) * 2 * len(gpu.Elems) * len(gpu.ReduceOps); ran != want {
		t.Errorf("%d runs, want %d", ran, want)
	}
}

// Every special value alone (an exact copy, NaN payloads included), every
// pair of them and a third at p = 3, as TestPTXSemantics pairs them for
// the pairwise kernels: signed zeros, NaNs, infinities, extremes, ties.
func TestPeerPTXSpecials(t *testing.T) {
	entries, err := fake.ParsePTX(gpu.PTX())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		op, el, vec, ok := gpu.ParsePeerKernel(e.Name)
		if !ok {
			continue
		}
		size, sp := el.Size(), specials(el)
		n := len(sp) * len(sp)
		for _, p := range []int{1, 2, 3} {
			srcs := make([][]byte, p)
			for q := range srcs {
				srcs[q] = make([]byte, n*size)
				for i := range n {
					put(srcs[q][i*size:], sp[[]int{i % len(sp), i / len(sp), (i * 7) % len(sp)}[q]], size)
				}
			}
			want := make([]byte, n*size)
			if err := ops.CanonicalReduce(op, hostTypes[el], want, srcs); err != nil {
				t.Fatal(err)
			}
			c := peerCase{p: p, n: n, ndst: 1, grid: 2, block: 8}
			if !vec {
				c.skew = size
			}
			_, outs := runPeer(t, e, el, c, srcs)
			for i := range n {
				g, w := get(outs[0][i*size:], size), get(want[i*size:], size)
				if g != w && !((op == ops.Sum || op == ops.Prod) && p > 1 && isNaN(el, g) && isNaN(el, w)) {
					t.Errorf("%s, p %d: element %d: %#x, want %#x", e.Name, p, i, g, w)
					break
				}
			}
		}
	}
}

// The inputs above tell associations apart: for float32 sums of 9 and 64
// contributions the canonical tree and a left-to-right fold differ on
// some elements, so a kernel that folded would fail TestPeerPTXSemantics.
func TestPeerInputsSeeAssociation(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, p := range []int{5, 9, 64} {
		srcs := peerInputs(gpu.F32, p, 33, rng)
		tree := make([]byte, 33*4)
		if err := ops.CanonicalReduce(ops.Sum, ops.Float, tree, srcs); err != nil {
			t.Fatal(err)
		}
		differ := 0
		for i := range 33 {
			var fold float32
			for q := range p {
				x := math.Float32frombits(binary.LittleEndian.Uint32(srcs[q][4*i:]))
				if q == 0 {
					fold = x
				} else {
					fold += x
				}
			}
			g := binary.LittleEndian.Uint32(tree[4*i:])
			if g != math.Float32bits(fold) && !(isNaN(gpu.F32, uint64(g)) && fold != fold) {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("p = %d: the canonical sum equals a left fold on every element", p)
		}
	}
}

// p outside 1..PeerMaxSources makes a kernel do nothing (the host checks
// p; the fake refuses such a launch), and ndst 0 writes nothing.
func TestPeerGuards(t *testing.T) {
	entries, err := fake.ParsePTX(gpu.PTX())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name != gpu.PeerKernel(ops.Sum, gpu.F32, true) {
			continue
		}
		out := make([]byte, 16)
		for _, p := range []uint64{0, gpu.PeerMaxSources + 1, 1 << 32} {
			m := newMachine(e, 0x1000, 1, 0x2000, p, 4)
			m.addBuffer(0x1000, binary.LittleEndian.AppendUint64(nil, 0x3000))
			m.addBuffer(0x3000, out)
			m.grid(1, 4) // no source to read: a read would panic
			if string(out) != string(make([]byte, 16)) {
				t.Errorf("p = %d: wrote % x", p, out)
			}
		}
		m := newMachine(e, 0x1000, 0, 0x2000, 1, 4)
		src := []byte("0123456789abcdef")
		m.addBuffer(0x2000, binary.LittleEndian.AppendUint64(nil, 0x4000))
		m.addBuffer(0x4000, src)
		m.grid(1, 4)
	}
}
