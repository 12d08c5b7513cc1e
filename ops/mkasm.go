//go:build ignore

// mkasm writes asm_amd64.s and asm_amd64.go: the AVX2 and AVX-512 loops of
// the hot kernels, their Go wrappers, and the tables that tell
// kernels_amd64.go which kernel serves which (op, kind). Run it with
// `go generate` in this folder.
//
// Every loop has the same shape. It takes dst, a, b and a byte count n, a
// multiple of the step (the bytes one vector register covers); the Go
// wrapper hands the remaining elements to the portable kernel. The main
// loop does 4 vectors per iteration, stage by stage (all loads, all ops,
// all stores), a second loop one vector at a time. Each lane (one vector's
// worth) loads a, loads or reads b in place, computes, stores.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"
)

// level is one instruction-set level.
type level struct {
	name  string // suffix of function names
	reg   string // vector register prefix
	width int    // bytes per vector register
	mov   string // unaligned integer vector load and store
}

var (
	avx2   = level{"AVX2", "Y", 32, "VMOVDQU"}
	avx512 = level{"AVX512", "Z", 64, "VMOVDQU64"}
)

// kernel is one generated function.
type kernel struct {
	name  string   // Go name without the level suffix
	op    string   // Go Op constant
	kinds []string // Go kind constants it serves
	elem  string   // in memory: "int" (any integer), "f32", "f64", "f16", "bf16"
	calc  string   // an instruction "OP b, a, a", or "fmax", "fmin"
	tail  string   // the Go kernel for the elements after the last vector
	to32  bool     // 16-bit operands, a float32 result (Reductions' leaves)
}

// wide reports whether the kernel computes in float32 on 16-bit elements:
// a register then covers half its width in memory.
func (k kernel) wide() bool { return k.elem == "f16" || k.elem == "bf16" }

func (k kernel) step(l level) int {
	if k.wide() {
		return l.width / 2
	}
	return l.width
}

// fsuffix is the float instruction suffix: PS or PD.
func (k kernel) fsuffix() string {
	if k.elem == "f64" {
		return "PD"
	}
	return "PS"
}

// kernels returns the kernels of a level.
func kernels(l level) []kernel {
	var ks []kernel
	add := func(name, op, elem, calc, tail string, kinds ...string) {
		ks = append(ks, kernel{name, op, kinds, elem, calc, tail, false})
	}
	ints := []struct {
		name, gotyp string
		bits        int
		sgn         string // S or U: signed or unsigned compares
	}{
		{"I8", "int8", 8, "S"}, {"U8", "uint8", 8, "U"},
		{"I16", "int16", 16, "S"}, {"U16", "uint16", 16, "U"},
		{"I32", "int32", 32, "S"}, {"U32", "uint32", 32, "U"},
		{"I64", "int64", 64, "S"}, {"U64", "uint64", 64, "U"},
	}
	suffix := map[int]string{8: "B", 16: "W", 32: "D", 64: "Q"}
	for _, t := range ints {
		s, k := suffix[t.bits], "k"+t.name
		if t.sgn == "S" { // sum and product are the same for both signednesses
			both := []string{k, "kU" + t.name[1:]}
			add("sum"+t.name, "Sum", "int", "VPADD"+s, "sumK["+t.gotyp+"]", both...)
			switch {
			case t.bits == 16 || t.bits == 32:
				add("prod"+t.name, "Prod", "int", "VPMULL"+s, "prodK["+t.gotyp+"]", both...)
			case t.bits == 64 && l == avx512: // VPMULLQ is AVX512DQ
				add("prod"+t.name, "Prod", "int", "VPMULLQ", "prodK["+t.gotyp+"]", both...)
			}
		}
		if t.bits < 64 || l == avx512 { // 64-bit compares are AVX-512 only
			add("max"+t.name, "Max", "int", "VPMAX"+t.sgn+s, "maxIntK["+t.gotyp+"]", k)
			add("min"+t.name, "Min", "int", "VPMIN"+t.sgn+s, "minIntK["+t.gotyp+"]", k)
		}
	}
	for _, f := range []struct{ name, elem, gotyp, sfx, kind, complexKind string }{
		{"F32", "f32", "float32", "PS", "kF32", "kC64"},
		{"F64", "f64", "float64", "PD", "kF64", "kC128"},
	} {
		add("sum"+f.name, "Sum", f.elem, "VADD"+f.sfx, "sumK["+f.gotyp+"]", f.kind, f.complexKind)
		add("prod"+f.name, "Prod", f.elem, "VMUL"+f.sfx, "prodK["+f.gotyp+"]", f.kind)
		add("max"+f.name, "Max", f.elem, "fmax", "maxFloatK["+f.gotyp+"]", f.kind)
		add("min"+f.name, "Min", f.elem, "fmin", "minFloatK["+f.gotyp+"]", f.kind)
	}
	for _, h := range []struct {
		name, elem string
		kinds      []string // the sum also serves MPI_COMPLEX4
	}{{"F16", "f16", []string{"kF16", "kC16"}}, {"BF16", "bf16", []string{"kBF16"}}} {
		add("sum"+h.name, "Sum", h.elem, "VADDPS", "sum"+h.name+"K", h.kinds...)
		add("prod"+h.name, "Prod", h.elem, "VMULPS", "prod"+h.name+"K", h.kinds[0])
		add("max"+h.name, "Max", h.elem, "fmax", "max"+h.name+"K", h.kinds[0])
		add("min"+h.name, "Min", h.elem, "fmin", "min"+h.name+"K", h.kinds[0])
		// Conversions between a buffer of 16-bit floats and one of float32s
		// (Reductions that accumulate in float32): no op, no table entry.
		add("widen"+h.name, "", h.elem, "widen", "widen"+h.name)
		add("narrow"+h.name, "", h.elem, "narrow", "narrow"+h.name)
		for _, op := range []struct{ name, calc string }{{"sum", "VADDPS"}, {"prod", "VMULPS"}} {
			ks = append(ks, kernel{name: op.name + h.name + "To32", elem: h.elem, calc: op.calc,
				tail: op.name + h.name + "To32", to32: true})
		}
	}
	bitKinds := []string{"kByte", "kI8", "kU8", "kI16", "kU16", "kI32", "kU32", "kI64", "kU64", "kI128"}
	q := ""
	if l == avx512 {
		q = "Q" // the EVEX forms of the bitwise ops are named by lane size
	}
	add("band", "Band", "int", "VPAND"+q, "bandK", bitKinds...)
	add("bor", "Bor", "int", "VPOR"+q, "borK", bitKinds...)
	add("bxor", "Bxor", "int", "VPXOR"+q, "bxorK", bitKinds...)
	return ks
}

// Constant vectors, 64 bytes each, by name: 32-bit words or 64-bit words.
var consts = []struct {
	name  string
	bits  int
	value uint64
}{
	{"nanF64", 64, 0x7ff8000000000000}, // the canonical NaNs of MPI_MAX and MPI_MIN
	{"nanF32", 32, 0x7fc00000},
	{"one32", 32, 1}, // bfloat16 rounding
	{"round32", 32, 0x7fff},
	{"quiet32", 32, 0x40},
}

func main() {
	var s, g bytes.Buffer
	fmt.Fprint(&s, "// Code generated by mkasm.go; DO NOT EDIT.\n\n//go:build !purego\n\n#include \"textflag.h\"\n")
	for _, c := range consts {
		fmt.Fprintln(&s)
		for off := 0; off < 64; off += c.bits / 8 {
			fmt.Fprintf(&s, "DATA %s<>+%d(SB)/%d, $%#x\n", c.name, off, c.bits/8, c.value)
		}
		fmt.Fprintf(&s, "GLOBL %s<>(SB), RODATA|NOPTR, $64\n", c.name)
	}
	fmt.Fprint(&g, "// Code generated by mkasm.go; DO NOT EDIT.\n\n//go:build !purego\n\npackage ops\n\n")
	for _, l := range []level{avx2, avx512} {
		var table strings.Builder
		var conv strings.Builder
		for _, k := range kernels(l) {
			name := k.name + l.name
			writeFunc(&s, l, k, name)
			fmt.Fprintf(&g, "//go:noescape\nfunc %s(dst, a, b *byte, n int)\n\n", name)
			switch {
			case k.to32:
				fmt.Fprintf(&g, to32Wrapper, name, k.step(l), k.tail)
				fmt.Fprintf(&conv, "\t%s: %sK,\n", k.name, name)
			case k.calc == "widen":
				fmt.Fprintf(&g, widenWrapper, name, k.step(l), k.tail)
				fmt.Fprintf(&conv, "\t%s: %sK,\n", k.name, name)
			case k.calc == "narrow":
				fmt.Fprintf(&g, narrowWrapper, name, k.step(l), k.tail)
				fmt.Fprintf(&conv, "\t%s: %sK,\n", k.name, name)
			default:
				fmt.Fprintf(&g, wrapper, name, k.step(l), k.tail)
				fmt.Fprintf(&table, "\t{%s, []kind{%s}, %sK},\n", k.op, strings.Join(k.kinds, ", "), name)
			}
		}
		fmt.Fprintf(&g, "// vec%s lists the %s kernels.\nvar vec%s = []vecEntry{\n%s}\n\n",
			l.name, l.name, l.name, table.String())
		fmt.Fprintf(&g, "// conv%s holds the %s conversions.\nvar conv%s = convEntry{\n%s}\n\n",
			l.name, l.name, l.name, conv.String())
	}
	src, err := format.Source(g.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("asm_amd64.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("asm_amd64.s", s.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

// wrapper is the Kernel around a loop.
const wrapper = `func %[1]sK(dst, a, b []byte) {
	n := len(dst)
	if v := n &^ (%[2]d - 1); v > 0 {
		a, b = a[:n], b[:n]
		%[1]s(&dst[0], &a[0], &b[0], v)
		if v < n {
			%[3]s(dst[v:], a[v:], b[v:])
		}
		return
	}
	%[3]s(dst, a, b)
}

`

// widenWrapper and narrowWrapper convert between 16-bit floats and
// float32s: n counts the bytes of the 16-bit side, and the float32 side is
// at twice the offsets.
const widenWrapper = `func %[1]sK(dst, src []byte) {
	n := len(src)
	if v := n &^ (%[2]d - 1); v > 0 {
		_ = dst[2*n-1]
		%[1]s(&dst[0], &src[0], nil, v)
		if v < n {
			%[3]s(dst[2*v:], src[v:])
		}
		return
	}
	%[3]s(dst, src)
}

`

const narrowWrapper = `func %[1]sK(dst, src []byte) {
	n := len(dst)
	if v := n &^ (%[2]d - 1); v > 0 {
		_ = src[2*n-1]
		%[1]s(&dst[0], &src[0], nil, v)
		if v < n {
			%[3]s(dst[v:], src[2*v:])
		}
		return
	}
	%[3]s(dst, src)
}

`

// to32Wrapper combines 16-bit floats into float32s: n counts the bytes of
// an operand.
const to32Wrapper = `func %[1]sK(dst, a, b []byte) {
	n := len(a)
	if v := n &^ (%[2]d - 1); v > 0 {
		_, _ = dst[2*n-1], b[n-1]
		%[1]s(&dst[0], &a[0], &b[0], v)
		if v < n {
			%[3]s(dst[2*v:], a[v:], b[v:])
		}
		return
	}
	%[3]s(dst, a, b)
}

`

func writeFunc(w *bytes.Buffer, l level, k kernel, name string) {
	step := k.step(l)
	fmt.Fprintf(w, "\n// func %s(dst, a, b *byte, n int)\n", name)
	fmt.Fprintf(w, "TEXT ·%s(SB), NOSPLIT, $0-32\n", name)
	fmt.Fprint(w, "\tMOVQ dst+0(FP), DI\n\tMOVQ a+8(FP), SI\n\tMOVQ b+16(FP), DX\n\tMOVQ n+24(FP), CX\n")
	if (k.calc == "fmax" || k.calc == "fmin") && l == avx512 {
		nan := "nanF32"
		if k.elem == "f64" {
			nan = "nanF64"
		}
		fmt.Fprintf(w, "\tVMOVDQU64 %s<>(SB), Z31\n", nan)
	}
	fmt.Fprintf(w, "\tXORQ AX, AX\n\tMOVQ CX, BX\n\tANDQ $-%d, BX\n\tJMP check4\n", 4*step)
	fmt.Fprint(w, "loop4:\n")
	writeLanes(w, l, k, 4)
	fmt.Fprintf(w, "\tADDQ $%d, AX\ncheck4:\n\tCMPQ AX, BX\n\tJB loop4\n\tJMP check1\n", 4*step)
	fmt.Fprint(w, "loop1:\n")
	writeLanes(w, l, k, 1)
	fmt.Fprintf(w, "\tADDQ $%d, AX\ncheck1:\n\tCMPQ AX, CX\n\tJB loop1\n\tVZEROUPPER\n\tRET\n", step)
}

// writeLanes writes n lanes at offsets 0, step, 2*step... from AX, stage by
// stage. Lane i owns vector registers 4i to 4i+3 and mask register K(i+1).
func writeLanes(w *bytes.Buffer, l level, k kernel, n int) {
	step := k.step(l)
	reg := func(i, j int) string { return fmt.Sprintf("%s%d", l.reg, 4*i+j) }
	kreg := func(i int) string { return fmt.Sprintf("K%d", i+1) }
	mem := func(base string, i int) string { return fmt.Sprintf("%d(%s)(AX*1)", i*step, base) }
	a := func(i int) string { return reg(i, 0) }
	b := func(i int) string { return reg(i, 1) }
	emit := func(format string, args ...func(i int) string) {
		for i := 0; i < n; i++ {
			vals := make([]any, len(args))
			for j, f := range args {
				vals[j] = f(i)
			}
			fmt.Fprintf(w, "\t"+format+"\n", vals...)
		}
	}
	src := func(base string) func(int) string { return func(i int) string { return mem(base, i) } }
	p := k.fsuffix()

	// Load a, and b where the computation needs it in a register.
	load := func(dst func(int) string, base string) {
		switch k.elem {
		case "int":
			emit(l.mov+" %s, %s", src(base), dst)
		case "f32", "f64":
			emit("VMOVUP"+p[1:]+" %s, %s", src(base), dst)
		case "f16":
			emit("VCVTPH2PS %s, %s", src(base), dst)
		case "bf16": // the top half of a float32
			emit("VPMOVZXWD %s, %s", src(base), dst)
			emit("VPSLLD $16, %s, %s", dst, dst)
		}
	}
	// The float32 side of a conversion is at twice the 16-bit offsets.
	f32 := func(base string) func(int) string {
		return func(i int) string { return fmt.Sprintf("%d(%s)(AX*2)", 2*i*step, base) }
	}
	switch k.calc {
	case "widen":
		load(a, "SI")
		emit("VMOVUPS %s, %s", a, f32("DI"))
		return
	case "narrow":
		emit("VMOVUPS %s, %s", f32("SI"), a)
	default:
		load(a, "SI")
	}
	inPlace := !k.wide() && k.calc != "fmax" && k.calc != "fmin"
	if !inPlace && k.calc != "narrow" {
		load(b, "DX")
	}

	// Compute; res is the register that holds the result.
	res := a
	switch {
	case k.calc == "narrow":
	case inPlace:
		emit(k.calc+" %s, %s, %s", src("DX"), a, a)
	case k.calc != "fmax" && k.calc != "fmin":
		emit(k.calc+" %s, %s, %s", b, a, a)
	case l == avx512:
		// MPI_MAX and MPI_MIN. VRANGEPx orders -0 below +0 (imm8 bits 1:0
		// select max or min, bits 3:2 = 01 take the selected operand's
		// sign); the lanes where either operand is a NaN (the unordered
		// compare sets their mask bit) then take the canonical NaN in Z31.
		imm := 0b0101
		if k.calc == "fmin" {
			imm = 0b0100
		}
		emit("VCMP"+p+" $3, %s, %s, %s", b, a, kreg)
		emit(fmt.Sprintf("VRANGE%s $%d, %%s, %%s, %%s", p, imm), b, a, a)
		emit("VMOVA"+p+" Z31, %s, %s", kreg, a)
	default:
		// AVX2 has no VRANGE. t = max(a, b) and b' = max(b, a) agree
		// unless the operands are equal or unordered (VMAXPx returns its
		// second operand then); on equal operands a AND b (OR for MPI_MIN)
		// is +0 (-0) for signed zeros and the value otherwise. Then the
		// unordered lanes take the canonical NaN.
		m := func(i int) string { return reg(i, 2) }
		t := func(i int) string { return reg(i, 3) }
		op, combine := "VMAX"+p, "VAND"+p
		if k.calc == "fmin" {
			op, combine = "VMIN"+p, "VOR"+p
		}
		nan := "nanF32"
		if k.elem == "f64" {
			nan = "nanF64"
		}
		emit("VCMP"+p+" $3, %s, %s, %s", b, a, m)
		emit(op+" %s, %s, %s", b, a, t)
		emit(op+" %s, %s, %s", a, b, b)
		emit(combine+" %s, %s, %s", b, t, t)
		emit("VBLENDV"+p+" %s, "+nan+"<>(SB), %s, %s", m, t, t)
		res = t
	}

	// Store.
	dst := src("DI")
	if k.to32 {
		emit("VMOVUPS %s, %s", res, f32("DI"))
		return
	}
	switch k.elem {
	case "int":
		emit(l.mov+" %s, %s", res, dst)
	case "f32", "f64":
		emit("VMOVUP"+p[1:]+" %s, %s", res, dst)
	case "f16": // imm8 0: round to nearest even, whatever MXCSR says
		emit("VCVTPS2PH $0, %s, %s", res, dst)
	case "bf16":
		// Round to nearest even: add 0x7fff plus the lowest kept bit,
		// keep the top 16 bits. NaNs are kept (top bits) and made quiet.
		r, q := scratch(res, reg)
		emit("VPSRLD $16, %s, %s", res, r)
		if l == avx512 {
			emit("VPANDD one32<>(SB), %s, %s", r, r)
		} else {
			emit("VPAND one32<>(SB), %s, %s", r, r)
		}
		emit("VPADDD round32<>(SB), %s, %s", r, r)
		emit("VPADDD %s, %s, %s", res, r, r)
		emit("VPSRLD $16, %s, %s", r, r)
		if l == avx512 {
			emit("VCMPPS $3, %s, %s, %s", res, res, kreg)
			emit("VPSRLD $16, %s, %s", res, res)
			emit("VPORD quiet32<>(SB), %s, %s", res, res)
			emit("VMOVDQA32 %s, %s, %s", res, kreg, r)
			emit("VPMOVDW %s, %s", r, dst)
		} else {
			emit("VCMPPS $3, %s, %s, %s", res, res, q)
			emit("VPSRLD $16, %s, %s", res, res)
			emit("VPOR quiet32<>(SB), %s, %s", res, res)
			emit("VBLENDVPS %s, %s, %s, %s", q, res, r, r)
			// Pack the eight words into the low 128 bits: VPACKUSDW works
			// within 128-bit halves, VPERMQ brings quadwords 0 and 2
			// together.
			emit("VPACKUSDW %s, %s, %s", r, r, r)
			emit("VPERMQ $0x08, %s, %s", r, r)
			x := func(i int) string { return "X" + r(i)[1:] }
			emit("VMOVDQU %s, %s", x, dst)
		}
	}
}

// scratch returns two of a lane's registers that do not hold the result.
func scratch(res func(int) string, reg func(i, j int) string) (r, q func(int) string) {
	var free []func(int) string
	for j := range 4 {
		if reg(0, j) != res(0) {
			free = append(free, func(i int) string { return reg(i, j) })
		}
	}
	return free[0], free[1]
}
