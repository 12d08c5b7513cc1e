package gpu

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/gocoll/gocoll/ops"
)

// The peer kernels: the reductions of the one-shot and two-shot device
// collectives, which read every rank's contribution where it lies (the
// ranks' registered regions, mapped through CUDA IPC) and write the
// result to one or more outputs:
//
//	for every element i < n:  v = T(0, p) of srcs[0][i] .. srcs[p-1][i]
//	                          dsts[d][i] = v for every d < ndst
//
// T is the canonical association of reproducible mode (ops.Reduction,
// algorithms/canonical.go): T(lo, hi) splits at lo plus the largest power
// of two below hi-lo, so the result is the same bits on every rank and
// for every route. Every entry takes five .u64 parameters, in this order:
//
//	dsts  device address of an array of ndst device addresses (u64)
//	ndst  outputs
//	srcs  device address of an array of p device addresses (u64), in rank order
//	p     contributions, 1 to PeerMaxSources (else the kernel does nothing)
//	n     elements
//
// One-shot allreduce passes its output (ndst 1) and every rank's input
// slot; two-shot's reduce-scatter half passes slice r of every input and
// slice r of every rank's output (ndst p); reduce-scatter passes one
// output. A destination may be one of the sources (each element is read
// by the thread that writes it), but must not overlap another element of
// one.
//
// gocoll_peer_<op>_<type> reads and writes an element at a time and needs
// each address aligned to the element; gocoll_peerv_<op>_<type> moves 16
// bytes per load and store (ld.global.v4.b32, v2.b64) and needs every
// source and destination address 16-byte aligned (a GPU faults on a
// misaligned vector access, CUDA_ERROR_MISALIGNED_ADDRESS, sticky: the
// host must check, PeerVectorAligned). It handles any n itself: the last
// n mod (16 / element size) elements are reduced one at a time in the
// same launch. Both walk the elements (or vectors) with a grid-stride
// loop, so any grid covers any n.
//
// Semantics, bit for bit those of package ops' canonical reduction
// (ops.CanonicalReduce) but for the payload of a NaN made by a sum or a
// product:
//   - floating-point MPI_SUM and MPI_PROD accumulate along T with one
//     rounding per operation (add.rn, mul.rn, never fused); binary16 and
//     bfloat16 widen exactly to float32, accumulate in float32 and round
//     once, to nearest even, at the end (p = 1 is a copy);
//   - the other pairs (MPI_MAX and MPI_MIN, whose canonical NaN and
//     signed-zero rules are kernels.go's, and the wrapping integer ops)
//     are associative and commutative bit for bit, so the kernel folds
//     left to right, which is T(0, p) for them, and needs no stack.
//
// How T is computed in one pass over the contributions: a binary counter
// of partial results, one register level per power of two (ops.Reduction
// keeps the same stack in memory). Contributions come four at a time: the
// four are loaded together (four loads in flight per thread) and
// combined as T of four, then pushed as one block at level 2, merging
// while the level is taken (level 2+k holds T of 2^k blocks); the one to
// three contributions left over go to levels 1 and 0 without merging (the
// count is then a multiple of four); at the end the levels that hold a
// partial (the set bits of p) fold from the smallest up, each the left
// operand of what its lower levels made. Eight levels, in registers,
// cover p up to 255. The branches that pick a level test p and the
// contribution's index, which are the same in every thread of the grid,
// so a warp never diverges on them, and a push runs the merges it needs
// (one on average) instead of all eight levels predicated.

// PeerMaxSources is the largest p a peer kernel reduces: eight levels of
// partial results (PeerKernel). With p = 0 or more, a kernel does nothing.
const PeerMaxSources = 255

// PeerVectorBytes is what the vector variants move per load and store,
// and the alignment they need of every source and destination address.
const PeerVectorBytes = 16

var opNames = map[ops.Op]string{ops.Sum: "sum", ops.Prod: "prod", ops.Max: "max", ops.Min: "min"}

// PeerKernel returns the PTX entry of the peer reduction of op on e: the
// vector variant (16 bytes at a time, every address 16-byte aligned) when
// vec is set. It returns "" when there is none.
func PeerKernel(op ops.Op, e Elem, vec bool) string {
	name := opNames[op]
	if name == "" || e == ElemNone || int(e) >= len(elemNames) {
		return ""
	}
	if vec {
		return "gocoll_peerv_" + name + "_" + e.String()
	}
	return "gocoll_peer_" + name + "_" + e.String()
}

// ParsePeerKernel is PeerKernel's inverse.
func ParsePeerKernel(name string) (op ops.Op, e Elem, vec, ok bool) {
	for _, v := range []bool{false, true} {
		for _, op := range ReduceOps {
			for _, e := range Elems {
				if PeerKernel(op, e, v) == name {
					return op, e, v, true
				}
			}
		}
	}
	return ops.OpNull, ElemNone, false, false
}

// PeerVectorAligned reports whether every address is aligned for the
// vector variant of the peer kernels.
func PeerVectorAligned(addrs ...uintptr) bool {
	var or uintptr
	for _, a := range addrs {
		or |= a
	}
	return or%PeerVectorBytes == 0
}

// peerTree reports whether op on e depends on the association (a
// floating-point sum or product), so that the kernel must follow T.
func peerTree(op ops.Op, e Elem) bool {
	float := e == F16 || e == BF16 || e == F32 || e == F64
	return float && (op == ops.Sum || op == ops.Prod)
}

// peerEntries returns the PTX of every peer kernel.
func peerEntries() string {
	var b strings.Builder
	for _, vec := range []bool{false, true} {
		for _, e := range Elems {
			for _, op := range ReduceOps {
				b.WriteString(peerEntry(op, e, vec))
			}
		}
	}
	return b.String()
}

// ptxGen writes one entry: instructions, labels and registers, declared
// at the end by the counts used.
type ptxGen struct {
	name   string
	body   strings.Builder
	regs   map[string]int
	labels int
}

// regTypes are the register families, as kernels.go declares them.
var regTypes = []struct{ prefix, typ string }{
	{"p", ".pred"}, {"h", ".b16"}, {"r", ".b32"}, {"f", ".f32"}, {"rd", ".b64"}, {"fd", ".f64"},
}

func (g *ptxGen) reg(prefix string) string {
	g.regs[prefix]++
	return fmt.Sprintf("%%%s%d", prefix, g.regs[prefix])
}

func (g *ptxGen) regsN(prefix string, n int) []string {
	r := make([]string, n)
	for i := range r {
		r[i] = g.reg(prefix)
	}
	return r
}

// in writes one instruction.
func (g *ptxGen) in(op string, args ...string) {
	fmt.Fprintf(&g.body, "\t%s \t%s;\n", op, strings.Join(args, ", "))
}

// guarded writes one instruction executed where predicate p holds.
func (g *ptxGen) guarded(p, op string, args ...string) {
	fmt.Fprintf(&g.body, "\t@%s %s \t%s;\n", p, op, strings.Join(args, ", "))
}

func (g *ptxGen) label() string {
	g.labels++
	return fmt.Sprintf("$L_%s_%d", g.name, g.labels)
}

func (g *ptxGen) at(l string) { fmt.Fprintf(&g.body, "%s:\n", l) }

// branchIf branches to l when cmp (setp's comparison and type, such as
// "lt.u32") holds of a and b.
func (g *ptxGen) branchIf(cmp, a, b, l string) {
	p := g.reg("p")
	g.in("setp."+cmp, p, a, b)
	g.guarded(p, "bra", l)
}

func vec(regs []string) string { return "{" + strings.Join(regs, ", ") + "}" }

func imm(v int) string { return fmt.Sprint(v) }

// peerKernel is what one entry's code generation needs.
type peerKernel struct {
	*ptxGen
	op   ops.Op
	e    Elem
	tree bool

	dsts, dend, srcs, p32, pone, nan string
}

// valPrefix is the register family of a value while it is combined:
// float32 for the 16-bit floats and float32 along T, the element's own
// bits otherwise.
func (k *peerKernel) valPrefix() string {
	switch {
	case k.tree && k.e == F64:
		return "fd"
	case k.tree:
		return "f"
	case k.e.Size() == 2:
		return "h"
	case k.e.Size() == 4:
		return "r"
	}
	return "rd"
}

func peerEntry(op ops.Op, e Elem, vector bool) string {
	name := PeerKernel(op, e, vector)
	k := &peerKernel{ptxGen: &ptxGen{name: name, regs: map[string]int{}}, op: op, e: e, tree: peerTree(op, e)}
	param := func(i int) string { return fmt.Sprintf("%s_param_%d", name, i) }
	dsts, ndst, srcs, p, n := k.reg("rd"), k.reg("rd"), k.reg("rd"), k.reg("rd"), k.reg("rd")
	for i, r := range []string{dsts, ndst, srcs, p, n} {
		k.in("ld.param.u64", r, "["+param(i)+"]")
	}
	done := k.label()
	k.branchIf("eq.u64", p, "0", done)
	k.branchIf("gt.u64", p, imm(PeerMaxSources), done)
	k.in("cvta.to.global.u64", dsts, dsts)
	k.in("cvta.to.global.u64", srcs, srcs)
	k.dsts, k.srcs = dsts, srcs
	k.dend = k.reg("rd") // the end of the array of destinations
	k.in("shl.b64", k.dend, ndst, "3")
	k.in("add.s64", k.dend, k.dend, dsts)
	k.p32 = k.reg("r")
	k.in("cvt.u32.u64", k.p32, p)
	k.pone = k.reg("p")
	k.in("setp.eq.u32", k.pone, k.p32, "1")
	if !k.tree && (op == ops.Max || op == ops.Min) && (e == F16 || e == BF16 || e == F32 || e == F64) {
		switch e.Size() {
		case 2:
			k.nan = k.reg("h")
			k.in("mov.b16", k.nan, map[Elem]string{F16: "0x7E00", BF16: "0x7FC0"}[e])
		case 4:
			k.nan = k.reg("r")
			k.in("mov.b32", k.nan, "0x7FC00000")
		default:
			k.nan = k.reg("rd")
			k.in("mov.b64", k.nan, "0x7FF8000000000000")
		}
	}
	// The thread's first index and the grid's stride.
	ctaid, ntid, tid, nctaid := k.reg("r"), k.reg("r"), k.reg("r"), k.reg("r")
	k.in("mov.u32", ctaid, "%ctaid.x")
	k.in("mov.u32", ntid, "%ntid.x")
	k.in("mov.u32", tid, "%tid.x")
	k.in("mov.u32", nctaid, "%nctaid.x")
	gid, stride := k.reg("rd"), k.reg("rd")
	k.in("cvt.u64.u32", gid, tid)
	k.in("mad.wide.u32", gid, ctaid, ntid, gid)
	k.in("mul.wide.u32", stride, nctaid, ntid)
	if vector {
		// Whole vectors first, then the elements after the last one.
		lanes := PeerVectorBytes / e.Size()
		lg := imm(bits.TrailingZeros(uint(lanes)))
		nv, i := k.reg("rd"), k.reg("rd")
		k.in("shr.u64", nv, n, lg)
		k.in("mov.u64", i, gid)
		k.loop(lanes, i, nv, stride)
		start := k.reg("rd")
		k.in("shl.b64", start, nv, lg)
		k.in("add.s64", i, start, gid)
		k.loop(1, i, n, stride)
	} else {
		i := k.reg("rd")
		k.in("mov.u64", i, gid)
		k.loop(1, i, n, stride)
	}
	k.at(done)
	k.in("ret")

	var out strings.Builder
	fmt.Fprintf(&out, "\n.visible .entry %s(\n", name)
	for i := range 5 {
		sep := ","
		if i == 4 {
			sep = ""
		}
		fmt.Fprintf(&out, "\t.param .u64 %s%s\n", param(i), sep)
	}
	out.WriteString(")\n{\n")
	for _, rt := range regTypes {
		if c := k.regs[rt.prefix]; c > 0 {
			fmt.Fprintf(&out, "\t.reg %s \t%%%s<%d>;\n", rt.typ, rt.prefix, c+1)
		}
	}
	out.WriteString("\n")
	out.WriteString(k.body.String())
	out.WriteString("}\n")
	return out.String()
}

// loop reduces elements (lanes 1) or vectors of lanes elements: for i
// from its value below bound, by stride.
func (k *peerKernel) loop(lanes int, i, bound, stride string) {
	top, end := k.label(), k.label()
	k.at(top)
	k.branchIf("ge.u64", i, bound, end)
	off := k.reg("rd")
	shift := bits.TrailingZeros(uint(k.e.Size()))
	if lanes > 1 {
		shift = bits.TrailingZeros(PeerVectorBytes)
	}
	k.in("shl.b64", off, i, imm(shift))
	var vals, raw []string
	if k.tree {
		vals, raw = k.treeReduce(lanes, off)
	} else {
		vals = k.foldReduce(lanes, off)
	}
	k.store(k.output(lanes, vals, raw), lanes, off)
	k.in("add.s64", i, i, stride)
	k.in("bra.uni", top)
	k.at(end)
}

// address loads the address at [ptrs+at] (an element of srcs or dsts)
// and returns it plus off, as a global address.
func (k *peerKernel) address(ptrs string, at int, off string) string {
	a := k.reg("rd")
	src := "[" + ptrs + "]"
	if at != 0 {
		src = fmt.Sprintf("[%s+%d]", ptrs, at)
	}
	k.in("ld.global.u64", a, src)
	k.in("cvta.to.global.u64", a, a)
	k.in("add.s64", a, a, off)
	return a
}

// load reads the contribution at a into vals (lanes registers of
// valPrefix), and returns the raw words it read (the 16-bit bits, or
// b32 words of a vector) for a copy when p is 1.
func (k *peerKernel) load(a string, vals []string) []string {
	lanes, e := len(vals), k.e
	if lanes == 1 {
		switch {
		case e.Size() == 2 && !k.tree:
			k.in("ld.global.b16", vals[0], "["+a+"]")
			return vals
		case e == F16:
			h := k.reg("h")
			k.in("ld.global.b16", h, "["+a+"]")
			k.in("cvt.f32.f16", vals[0], h)
			return []string{h}
		case e == BF16:
			h, r := k.reg("h"), k.reg("r")
			k.in("ld.global.b16", h, "["+a+"]")
			k.in("cvt.u32.u16", r, h)
			k.in("shl.b32", r, r, "16")
			k.in("mov.b32", vals[0], r)
			return []string{h}
		}
		k.in("ld.global."+map[string]string{"f": "f32", "fd": "f64", "r": "b32", "rd": "b64"}[k.valPrefix()], vals[0], "["+a+"]")
		return vals
	}
	switch e.Size() {
	case 4:
		k.in("ld.global.v4."+map[bool]string{true: "f32", false: "b32"}[k.tree], vec(vals), "["+a+"]")
		return vals
	case 8:
		k.in("ld.global.v2."+map[bool]string{true: "f64", false: "b64"}[k.tree], vec(vals), "["+a+"]")
		return vals
	}
	words := k.regsN("r", 4)
	k.in("ld.global.v4.b32", vec(words), "["+a+"]")
	for w, word := range words {
		lo, hi := vals[2*w], vals[2*w+1]
		switch {
		case !k.tree:
			k.in("mov.b32", vec([]string{lo, hi}), word)
		case e == F16:
			h := k.regsN("h", 2)
			k.in("mov.b32", vec(h), word)
			k.in("cvt.f32.f16", lo, h[0])
			k.in("cvt.f32.f16", hi, h[1])
		default: // bfloat16: the top half of a float32 (a .b32 instruction writes a float register)
			k.in("shl.b32", lo, word, "16")
			k.in("and.b32", hi, word, "0xFFFF0000")
		}
	}
	return words
}

// loadAt loads contribution [ptrs+at] at offset off into vals.
func (k *peerKernel) loadAt(ptrs string, at int, off string, vals []string) []string {
	return k.load(k.address(ptrs, at, off), vals)
}

// combine sets dst = a op b, lane by lane (a is the left operand: the
// lower ranks).
func (k *peerKernel) combine(dst, a, b []string) {
	for l := range dst {
		k.combine1(dst[l], a[l], b[l])
	}
}

func (k *peerKernel) combine1(dst, a, b string) {
	e, op := k.e, k.op
	if k.tree {
		t := map[bool]string{true: "f64", false: "f32"}[e == F64]
		k.in(map[ops.Op]string{ops.Sum: "add.rn.", ops.Prod: "mul.rn."}[op]+t, dst, a, b)
		return
	}
	if sign := map[Elem]string{S32: "s32", U32: "u32", S64: "s64", U64: "u64"}[e]; sign != "" {
		k.in(map[ops.Op]string{ops.Sum: "add.", ops.Prod: "mul.lo.", ops.Max: "max.", ops.Min: "min."}[op]+sign, dst, a, b)
		return
	}
	// MPI_MAX and MPI_MIN on a float: the larger (smaller), the bitwise
	// AND (OR) of equal operands (signed zeros), the canonical NaN if
	// either is a NaN: kernels.go's rule.
	aWins, bWins, tie := "gt", "lt", "and"
	if op == ops.Min {
		aWins, bWins, tie = "lt", "gt", "or"
	}
	fa, fb := k.reg("f"), k.reg("f")
	var t, bitsType, fType string
	switch e {
	case F16, BF16:
		t, bitsType, fType = k.reg("h"), "b16", "f32"
		if e == F16 {
			k.in("cvt.f32.f16", fa, a)
			k.in("cvt.f32.f16", fb, b)
		} else {
			for _, x := range [][2]string{{fa, a}, {fb, b}} {
				r := k.reg("r")
				k.in("cvt.u32.u16", r, x[1])
				k.in("shl.b32", r, r, "16")
				k.in("mov.b32", x[0], r)
			}
		}
	case F32:
		t, bitsType, fType = k.reg("r"), "b32", "f32"
		k.in("mov.b32", fa, a)
		k.in("mov.b32", fb, b)
	default:
		fa, fb = k.reg("fd"), k.reg("fd")
		t, bitsType, fType = k.reg("rd"), "b64", "f64"
		k.in("mov.b64", fa, a)
		k.in("mov.b64", fb, b)
	}
	p := k.reg("p")
	k.in(tie+"."+bitsType, t, a, b)
	k.in("setp."+aWins+"."+fType, p, fa, fb)
	k.in("selp."+bitsType, t, a, t, p)
	k.in("setp."+bWins+"."+fType, p, fa, fb)
	k.in("selp."+bitsType, t, b, t, p)
	k.in("setp.nan."+fType, p, fa, fb)
	k.in("selp."+bitsType, t, k.nan, t, p)
	k.in("mov."+bitsType, dst, t)
}

// mov copies lanes.
func (k *peerKernel) mov(dst, src []string) {
	t := map[string]string{"f": "f32", "fd": "f64", "h": "b16", "r": "b32", "rd": "b64"}[k.valPrefix()]
	for l := range dst {
		k.in("mov."+t, dst[l], src[l])
	}
}

// foldReduce combines the p contributions left to right (ops whose
// result does not depend on the association) and returns the result.
func (k *peerKernel) foldReduce(lanes int, off string) []string {
	pre := k.valPrefix()
	acc := k.regsN(pre, lanes)
	sp, left := k.reg("rd"), k.reg("r")
	k.in("mov.u64", sp, k.srcs)
	k.loadAt(sp, 0, off, acc)
	k.in("add.s64", sp, sp, "8")
	k.in("sub.s32", left, k.p32, "1")
	four, one, end := k.label(), k.label(), k.label()
	k.at(four)
	k.branchIf("lt.u32", left, "4", one)
	var xs [4][]string
	for j := range xs {
		xs[j] = k.regsN(pre, lanes)
		k.loadAt(sp, 8*j, off, xs[j])
	}
	for j := range xs {
		k.combine(acc, acc, xs[j])
	}
	k.in("add.s64", sp, sp, "32")
	k.in("sub.s32", left, left, "4")
	k.in("bra.uni", four)
	k.at(one)
	k.branchIf("eq.u32", left, "0", end)
	x := k.regsN(pre, lanes)
	k.loadAt(sp, 0, off, x)
	k.combine(acc, acc, x)
	k.in("add.s64", sp, sp, "8")
	k.in("sub.s32", left, left, "1")
	k.in("bra.uni", one)
	k.at(end)
	return acc
}

// levels is the counter's depth: p <= 255 needs levels 0..7.
const levels = 8

// treeReduce computes T(0, p) with the counter of partials (see the top
// of this file) and returns it, with the raw words of contribution 0 when
// p is 1 (the last contribution, loaded alone).
func (k *peerKernel) treeReduce(lanes int, off string) (res, raw []string) {
	pre := k.valPrefix()
	var lv [levels][]string
	for i := range lv {
		lv[i] = k.regsN(pre, lanes)
	}
	c := k.regsN(pre, lanes)
	var xs [4][]string
	for j := range xs {
		xs[j] = k.regsN(pre, lanes)
	}
	sp, block, left, t := k.reg("rd"), k.reg("r"), k.reg("r"), k.reg("r")
	k.in("mov.u64", sp, k.srcs)
	k.in("mov.u32", block, "0")
	k.in("mov.u32", left, k.p32)

	// Blocks of four: T of the four, pushed at level 2. Block b merges
	// with levels 2 .. 2+t-1, t the trailing ones of b, and lands at 2+t.
	four, tail := k.label(), k.label()
	k.at(four)
	k.branchIf("lt.u32", left, "4", tail)
	for j := range xs {
		k.loadAt(sp, 8*j, off, xs[j])
	}
	k.combine(c, xs[0], xs[1])
	k.combine(xs[2], xs[2], xs[3])
	k.combine(c, c, xs[2])
	k.in("not.b32", t, block)
	k.in("brev.b32", t, t)
	k.in("clz.b32", t, t)
	var store [levels]string
	for l := 2; l < levels; l++ {
		store[l] = k.label()
	}
	pushed := k.label()
	for l := 2; l < levels-1; l++ {
		k.branchIf("eq.u32", t, imm(l-2), store[l])
		k.combine(c, lv[l], c)
	}
	for l := levels - 1; l >= 2; l-- {
		k.at(store[l])
		k.mov(lv[l], c)
		if l > 2 {
			k.in("bra.uni", pushed)
		}
	}
	k.at(pushed)
	k.in("add.s32", block, block, "1")
	k.in("add.s64", sp, sp, "32")
	k.in("sub.s32", left, left, "4")
	k.in("bra.uni", four)

	// The 0 to 3 left: a pair at level 1, a single at level 0.
	k.at(tail)
	single, fold := k.label(), k.label()
	k.in("and.b32", t, left, "2")
	k.branchIf("eq.u32", t, "0", single)
	k.loadAt(sp, 0, off, xs[0])
	k.loadAt(sp, 8, off, xs[1])
	k.combine(lv[1], xs[0], xs[1])
	k.in("add.s64", sp, sp, "16")
	k.at(single)
	k.in("and.b32", t, left, "1")
	k.branchIf("eq.u32", t, "0", fold)
	raw = k.loadAt(sp, 0, off, lv[0])

	// The levels that hold a partial are p's set bits: fold them from the
	// lowest up, each the left operand of what lies below it.
	k.at(fold)
	low, done := k.reg("r"), k.label()
	k.in("neg.s32", low, k.p32)
	k.in("and.b32", low, low, k.p32)
	res = k.regsN(pre, lanes)
	for l := range levels {
		next, first := k.label(), k.label()
		k.in("and.b32", t, k.p32, imm(1<<l))
		k.branchIf("eq.u32", t, "0", next)
		k.branchIf("eq.u32", low, imm(1<<l), first)
		k.combine(res, lv[l], res)
		k.in("bra.uni", next)
		k.at(first)
		k.mov(res, lv[l])
		k.at(next)
		if l < levels-1 {
			k.branchIf("lt.u32", k.p32, imm(2<<l), done)
		}
	}
	k.at(done)
	return res, raw
}

// output turns the lanes' values into what is stored: the element's
// bits, 16-bit lanes packed in pairs into b32 words; a 16-bit sum or
// product rounds its float32 once, and when p is 1 stores the raw bits it
// read (a copy, as ops does, NaN payloads and all).
func (k *peerKernel) output(lanes int, vals, raw []string) []string {
	if !k.tree || k.e.Size() != 2 {
		if k.e.Size() == 2 && lanes > 1 { // 16-bit max and min: pack the lanes
			words := k.regsN("r", lanes/2)
			for w := range words {
				k.in("mov.b32", words[w], vec([]string{vals[2*w], vals[2*w+1]}))
			}
			return words
		}
		return vals
	}
	halves := make([]string, lanes)
	for l, v := range vals {
		halves[l] = k.narrow(v)
	}
	if lanes == 1 {
		h := halves[0]
		if k.e == BF16 {
			h = k.reg("h")
			k.in("cvt.u16.u32", h, halves[0])
		}
		k.guarded(k.pone, "mov.b16", h, raw[0])
		return []string{h}
	}
	words := k.regsN("r", lanes/2)
	for w := range words {
		lo, hi := halves[2*w], halves[2*w+1]
		if k.e == F16 {
			k.in("mov.b32", words[w], vec([]string{lo, hi}))
		} else {
			t := k.reg("r")
			k.in("shl.b32", t, hi, "16")
			k.in("or.b32", words[w], lo, t)
		}
		k.guarded(k.pone, "mov.b32", words[w], raw[w])
	}
	return words
}

// narrow rounds float32 v to the 16-bit type, once, to nearest even, as
// kernels.go's bodies do; a NaN keeps what fits of its payload, quiet. A
// binary16 comes back in a b16 register, a bfloat16 in the low half of a
// b32 one.
func (k *peerKernel) narrow(v string) string {
	r := k.regsN("r", 4)
	p := k.reg("p")
	k.in("mov.b32", r[0], v)
	if k.e == F16 {
		h := k.regsN("h", 2)
		k.in("cvt.rn.f16.f32", h[0], v)
		k.in("shr.u32", r[1], r[0], "16")
		k.in("and.b32", r[1], r[1], "0x8000")
		k.in("shr.u32", r[2], r[0], "13")
		k.in("and.b32", r[2], r[2], "0x3FF")
		k.in("or.b32", r[1], r[1], r[2])
		k.in("or.b32", r[1], r[1], "0x7E00")
		k.in("cvt.u16.u32", h[1], r[1])
		k.in("setp.nan.f32", p, v, v)
		k.in("selp.b16", h[0], h[1], h[0], p)
		return h[0]
	}
	k.in("shr.u32", r[1], r[0], "16")
	k.in("and.b32", r[2], r[1], "1")
	k.in("add.s32", r[2], r[2], "0x7FFF")
	k.in("add.s32", r[2], r[0], r[2])
	k.in("shr.u32", r[2], r[2], "16")
	k.in("or.b32", r[1], r[1], "0x40")
	k.in("and.b32", r[3], r[0], "0x7FFFFFFF")
	k.in("setp.gt.u32", p, r[3], "0x7F800000")
	k.in("selp.b32", r[2], r[1], r[2], p)
	return r[2]
}

// store writes the output to every destination at offset off.
func (k *peerKernel) store(out []string, lanes int, off string) {
	dp := k.reg("rd")
	top, end := k.label(), k.label()
	k.in("mov.u64", dp, k.dsts)
	k.at(top)
	k.branchIf("ge.u64", dp, k.dend, end)
	a := k.address(dp, 0, off)
	var st string
	switch {
	case lanes == 1 && k.e.Size() == 2:
		st = "st.global.b16"
	case lanes == 1:
		st = "st.global." + map[string]string{"f": "f32", "fd": "f64", "r": "b32", "rd": "b64"}[k.valPrefix()]
	case k.e.Size() == 8:
		st = "st.global.v2." + map[bool]string{true: "f64", false: "b64"}[k.tree]
	case k.e.Size() == 4:
		st = "st.global.v4." + map[bool]string{true: "f32", false: "b32"}[k.tree]
	default:
		st = "st.global.v4.b32"
	}
	val := out[0]
	if lanes > 1 {
		val = vec(out)
	}
	k.in(st, "["+a+"]", val)
	k.in("add.s64", dp, dp, "8")
	k.in("bra.uni", top)
	k.at(end)
}
