package gpu

import (
	"fmt"
	"strings"

	"github.com/gocoll/gocoll/ops"
)

// The GPU reduction kernels: dst[i] = a[i] op b[i] for MPI_SUM, MPI_PROD,
// MPI_MAX and MPI_MIN on binary16, bfloat16, float32, float64 and the
// 32- and 64-bit integers. They are PTX written by hand, kept here as
// text and compiled by the driver for whatever GPU it finds
// (cuModuleLoadData: no nvcc at build time). Every entry takes the same
// four parameters, in the order the launcher passes them (cuda.c,
// gocoll_cu_launch): dst, a, b (device addresses) and n (elements), and
// walks the vector with a grid-stride loop, so any grid covers any n.
//
// The semantics are package ops' (and so the host's), bit for bit except
// for the NaN that an arithmetic operation on NaNs produces:
//   - floating-point sums and products are rounded once, to nearest even
//     (add.rn, mul.rn: never contracted into a fused multiply-add);
//     binary16 and bfloat16 are widened to float32 and rounded back once;
//   - MPI_MAX and MPI_MIN return the canonical NaN (0x7fc00000, and the
//     same in every width) when an operand is a NaN, max(+0, -0) = +0 and
//     min(+0, -0) = -0: for equal operands max takes the bitwise AND of
//     the two, min the OR, which differ only on signed zeros;
//   - integer sums and products wrap; unsigned types compare unsigned.

// Elem is the machine type of a GPU reduction.
type Elem uint8

const (
	ElemNone Elem = iota
	F16
	BF16
	F32
	F64
	S32
	S64
	U32
	U64
)

var elemNames = [...]string{"none", "f16", "bf16", "f32", "f64", "s32", "s64", "u32", "u64"}

func (e Elem) String() string { return elemNames[e] }

// Size returns the element size in bytes.
func (e Elem) Size() int { return [...]int{0, 2, 2, 4, 8, 4, 8, 4, 8}[e] }

// Elems lists the element types with GPU kernels.
var Elems = []Elem{F16, BF16, F32, F64, S32, S64, U32, U64}

// ReduceOps lists the ops with GPU kernels.
var ReduceOps = []ops.Op{ops.Sum, ops.Prod, ops.Max, ops.Min}

// ElemOf returns the machine type of an MPI datatype, or ElemNone when
// its reductions run on the host.
func ElemOf(t ops.Type) Elem {
	switch t {
	case ops.Float16, ops.Real2:
		return F16
	case ops.BFloat16:
		return BF16
	case ops.Float, ops.Real, ops.Real4:
		return F32
	case ops.Double, ops.DoublePrecision, ops.Real8:
		return F64
	case ops.Int, ops.Int32, ops.Integer, ops.Integer4:
		return S32
	case ops.Long, ops.LongLong, ops.Int64, ops.Integer8, ops.Aint, ops.Offset, ops.Count:
		return S64
	case ops.Unsigned, ops.Uint32:
		return U32
	case ops.UnsignedLong, ops.UnsignedLongLong, ops.Uint64:
		return U64
	}
	return ElemNone
}

// KernelName returns the PTX entry of op on e, or "" when there is none.
func KernelName(op ops.Op, e Elem) string {
	name := opNames[op]
	if name == "" || e == ElemNone {
		return ""
	}
	return "gocoll_" + name + "_" + e.String()
}

// Kernel returns the PTX entry for a predefined op on an MPI datatype,
// or "" when the reduction must run on the host.
func Kernel(op ops.Op, t ops.Type) string { return KernelName(op, ElemOf(t)) }

// ParseKernelName is KernelName's inverse.
func ParseKernelName(name string) (ops.Op, Elem, bool) {
	for _, op := range ReduceOps {
		for _, e := range Elems {
			if KernelName(op, e) == name {
				return op, e, true
			}
		}
	}
	return ops.OpNull, ElemNone, false
}

// PTX returns the module with every kernel: the pairwise ones below and
// the peer ones (kernels_peer.go). The driver compiles it once per
// context.
func PTX() string { return ptxModule }

var ptxModule = buildModule()

func buildModule() string {
	var b strings.Builder
	b.WriteString(ptxHeader)
	for _, e := range Elems {
		for _, op := range ReduceOps {
			name := KernelName(op, e)
			k := 0 // sum and product
			if op == ops.Max || op == ops.Min {
				k = 1
			}
			body := strings.NewReplacer(ptxBodyArgs(op, e)...).Replace(ptxBodies[e][k])
			b.WriteString(strings.NewReplacer("NAME", name, "SHIFT", fmt.Sprint(shiftOf(e)), "BODY", body).Replace(ptxEntry))
		}
	}
	b.WriteString(peerEntries())
	return b.String()
}

func shiftOf(e Elem) int { return map[int]int{2: 1, 4: 2, 8: 3}[e.Size()] }

// ptxBodyArgs fills the placeholders of a body: ARITH (the instruction of
// a sum or product), the comparisons that pick a (A_WINS) and b (B_WINS)
// and the bitwise op for equal operands (TIE) of a max or min.
func ptxBodyArgs(op ops.Op, e Elem) []string {
	sign := map[Elem]string{S32: "s32", U32: "u32", S64: "s64", U64: "u64"}[e]
	float := map[Elem]string{F32: "f32", F64: "f64", F16: "f32", BF16: "f32"}[e]
	var arith string
	switch op {
	case ops.Sum:
		arith = "add.rn." + float
		if sign != "" {
			arith = "add." + sign
		}
	case ops.Prod:
		arith = "mul.rn." + float
		if sign != "" {
			arith = "mul.lo." + sign
		}
	case ops.Max:
		arith = "max." + sign
	case ops.Min:
		arith = "min." + sign
	}
	aWins, bWins, tie := "gt", "lt", "and"
	if op == ops.Min {
		aWins, bWins, tie = "lt", "gt", "or"
	}
	return []string{"ARITH", arith, "A_WINS", aWins, "B_WINS", bWins, "TIE", tie}
}

const ptxHeader = `//
// gocoll's reduction kernels: gocoll_<op>_<type>, dst[i] = a[i] op b[i]
// (gpu/kernels.go, written by hand), and gocoll_peer(v)_<op>_<type>,
// dsts[d][i] = T(0, p) of srcs[0..p-1][i] (generated by
// gpu/kernels_peer.go).
//
.version 7.0
.target sm_70
.address_size 64
`

// ptxEntry is every kernel: its parameters, the grid-stride loop over the
// elements, and in the middle BODY, which combines element i: it reads
// a[i] at %rd8 and b[i] at %rd9 and writes dst[i] at %rd10. dst may be a
// or b: each element is read before it is written, by the same thread.
const ptxEntry = `
.visible .entry NAME(
	.param .u64 NAME_param_0,
	.param .u64 NAME_param_1,
	.param .u64 NAME_param_2,
	.param .u64 NAME_param_3
)
{
	.reg .pred 	%p<4>;
	.reg .b16 	%h<8>;
	.reg .b32 	%r<16>;
	.reg .f32 	%f<8>;
	.reg .b64 	%rd<16>;
	.reg .f64 	%fd<8>;

	ld.param.u64 	%rd1, [NAME_param_0];
	ld.param.u64 	%rd2, [NAME_param_1];
	ld.param.u64 	%rd3, [NAME_param_2];
	ld.param.u64 	%rd4, [NAME_param_3];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	cvta.to.global.u64 	%rd3, %rd3;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mov.u32 	%r4, %nctaid.x;
	cvt.u64.u32 	%rd5, %r3;
	mad.wide.u32 	%rd5, %r1, %r2, %rd5;
	mul.wide.u32 	%rd6, %r4, %r2;
$L_NAME_loop:
	setp.ge.u64 	%p1, %rd5, %rd4;
	@%p1 bra 	$L_NAME_done;
	shl.b64 	%rd7, %rd5, SHIFT;
	add.s64 	%rd8, %rd2, %rd7;
	add.s64 	%rd9, %rd3, %rd7;
	add.s64 	%rd10, %rd1, %rd7;
BODY	add.s64 	%rd5, %rd5, %rd6;
	bra.uni 	$L_NAME_loop;
$L_NAME_done:
	ret;
}
`

// ptxBodies[e][0] is the sum and product of e (ARITH), [1] its max and
// min.
var ptxBodies = map[Elem][2]string{
	F32: {`	ld.global.f32 	%f1, [%rd8];
	ld.global.f32 	%f2, [%rd9];
	ARITH 	%f3, %f1, %f2;
	st.global.f32 	[%rd10], %f3;
`, `	ld.global.b32 	%r5, [%rd8];
	ld.global.b32 	%r6, [%rd9];
	mov.b32 	%f1, %r5;
	mov.b32 	%f2, %r6;
	TIE.b32 	%r7, %r5, %r6;
	setp.A_WINS.f32 	%p2, %f1, %f2;
	selp.b32 	%r7, %r5, %r7, %p2;
	setp.B_WINS.f32 	%p2, %f1, %f2;
	selp.b32 	%r7, %r6, %r7, %p2;
	setp.nan.f32 	%p2, %f1, %f2;
	mov.b32 	%r8, 0x7FC00000;
	selp.b32 	%r7, %r8, %r7, %p2;
	st.global.b32 	[%rd10], %r7;
`},
	F64: {`	ld.global.f64 	%fd1, [%rd8];
	ld.global.f64 	%fd2, [%rd9];
	ARITH 	%fd3, %fd1, %fd2;
	st.global.f64 	[%rd10], %fd3;
`, `	ld.global.b64 	%rd11, [%rd8];
	ld.global.b64 	%rd12, [%rd9];
	mov.b64 	%fd1, %rd11;
	mov.b64 	%fd2, %rd12;
	TIE.b64 	%rd13, %rd11, %rd12;
	setp.A_WINS.f64 	%p2, %fd1, %fd2;
	selp.b64 	%rd13, %rd11, %rd13, %p2;
	setp.B_WINS.f64 	%p2, %fd1, %fd2;
	selp.b64 	%rd13, %rd12, %rd13, %p2;
	setp.nan.f64 	%p2, %fd1, %fd2;
	mov.b64 	%rd14, 0x7FF8000000000000;
	selp.b64 	%rd13, %rd14, %rd13, %p2;
	st.global.b64 	[%rd10], %rd13;
`},
	// binary16: widened exactly by cvt, the float32 result rounded back
	// once by cvt.rn; a NaN result keeps what fits of its payload, quiet,
	// as package ops narrows NaNs.
	F16: {`	ld.global.b16 	%h1, [%rd8];
	ld.global.b16 	%h2, [%rd9];
	cvt.f32.f16 	%f1, %h1;
	cvt.f32.f16 	%f2, %h2;
	ARITH 	%f3, %f1, %f2;
	cvt.rn.f16.f32 	%h3, %f3;
	mov.b32 	%r5, %f3;
	shr.u32 	%r6, %r5, 16;
	and.b32 	%r6, %r6, 0x8000;
	shr.u32 	%r7, %r5, 13;
	and.b32 	%r7, %r7, 0x3FF;
	or.b32 	%r6, %r6, %r7;
	or.b32 	%r6, %r6, 0x7E00;
	cvt.u16.u32 	%h4, %r6;
	setp.nan.f32 	%p2, %f3, %f3;
	selp.b16 	%h3, %h4, %h3, %p2;
	st.global.b16 	[%rd10], %h3;
`, `	ld.global.b16 	%h1, [%rd8];
	ld.global.b16 	%h2, [%rd9];
	cvt.f32.f16 	%f1, %h1;
	cvt.f32.f16 	%f2, %h2;
	TIE.b16 	%h3, %h1, %h2;
	setp.A_WINS.f32 	%p2, %f1, %f2;
	selp.b16 	%h3, %h1, %h3, %p2;
	setp.B_WINS.f32 	%p2, %f1, %f2;
	selp.b16 	%h3, %h2, %h3, %p2;
	setp.nan.f32 	%p2, %f1, %f2;
	mov.b16 	%h4, 0x7E00;
	selp.b16 	%h3, %h4, %h3, %p2;
	st.global.b16 	[%rd10], %h3;
`},
	// bfloat16: the top half of a float32. sm_70 has no cvt to bf16, so
	// the rounding (to nearest even) and the NaN case are integer code,
	// the same as package ops' f32ToBF16.
	BF16: {`	ld.global.b16 	%h1, [%rd8];
	ld.global.b16 	%h2, [%rd9];
	cvt.u32.u16 	%r5, %h1;
	shl.b32 	%r5, %r5, 16;
	mov.b32 	%f1, %r5;
	cvt.u32.u16 	%r6, %h2;
	shl.b32 	%r6, %r6, 16;
	mov.b32 	%f2, %r6;
	ARITH 	%f3, %f1, %f2;
	mov.b32 	%r5, %f3;
	shr.u32 	%r6, %r5, 16;
	and.b32 	%r7, %r6, 1;
	add.s32 	%r7, %r7, 0x7FFF;
	add.s32 	%r7, %r5, %r7;
	shr.u32 	%r7, %r7, 16;
	or.b32 	%r6, %r6, 0x40;
	and.b32 	%r8, %r5, 0x7FFFFFFF;
	setp.gt.u32 	%p2, %r8, 0x7F800000;
	selp.b32 	%r7, %r6, %r7, %p2;
	cvt.u16.u32 	%h3, %r7;
	st.global.b16 	[%rd10], %h3;
`, `	ld.global.b16 	%h1, [%rd8];
	ld.global.b16 	%h2, [%rd9];
	cvt.u32.u16 	%r5, %h1;
	shl.b32 	%r5, %r5, 16;
	mov.b32 	%f1, %r5;
	cvt.u32.u16 	%r6, %h2;
	shl.b32 	%r6, %r6, 16;
	mov.b32 	%f2, %r6;
	TIE.b16 	%h3, %h1, %h2;
	setp.A_WINS.f32 	%p2, %f1, %f2;
	selp.b16 	%h3, %h1, %h3, %p2;
	setp.B_WINS.f32 	%p2, %f1, %f2;
	selp.b16 	%h3, %h2, %h3, %p2;
	setp.nan.f32 	%p2, %f1, %f2;
	mov.b16 	%h4, 0x7FC0;
	selp.b16 	%h3, %h4, %h3, %p2;
	st.global.b16 	[%rd10], %h3;
`},
	S32: {ptxInt32, ptxInt32},
	U32: {ptxInt32, ptxInt32},
	S64: {ptxInt64, ptxInt64},
	U64: {ptxInt64, ptxInt64},
}

// Integers: one instruction for every op (add, mul.lo, max, min; signed
// or unsigned).
const (
	ptxInt32 = `	ld.global.b32 	%r5, [%rd8];
	ld.global.b32 	%r6, [%rd9];
	ARITH 	%r7, %r5, %r6;
	st.global.b32 	[%rd10], %r7;
`
	ptxInt64 = `	ld.global.b64 	%rd11, [%rd8];
	ld.global.b64 	%rd12, [%rd9];
	ARITH 	%rd13, %rd11, %rd12;
	st.global.b64 	[%rd10], %rd13;
`
)
