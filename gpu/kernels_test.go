package gpu_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// The PTX module is well formed in every way that can be checked without
// a GPU: header directives, balanced braces, one entry per (op, type),
// each with the four 64-bit parameters the launcher passes (cuda.c's
// gocoll_cu_launch: dst, a, b, n) loaded in that order, declared
// registers and labels, loads and stores of the element's width at the
// element's stride.
func TestPTXWellFormed(t *testing.T) {
	src := gpu.PTX()
	for _, d := range []string{".version 7.0", ".target sm_70", ".address_size 64"} {
		if !strings.Contains(src, d+"\n") {
			t.Errorf("no %q directive", d)
		}
	}
	entries, err := fake.ParsePTX(src)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * len(gpu.Elems) * len(gpu.ReduceOps); len(entries) != want {
		t.Errorf("%d entries, want %d (pairwise, peer and peer vector ones)", len(entries), want)
	}
	byName := map[string]fake.Entry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	width := map[int]string{2: "b16", 4: "(f32|b32)", 8: "(f64|b64)"}
	shift := map[int]string{2: "1", 4: "2", 8: "3"}
	for _, el := range gpu.Elems {
		for _, op := range gpu.ReduceOps {
			name := gpu.KernelName(op, el)
			e, ok := byName[name]
			if !ok {
				t.Errorf("no entry %s", name)
				continue
			}
			if len(e.Params) != 4 {
				t.Errorf("%s: %d parameters, want 4 (dst, a, b, n)", name, len(e.Params))
				continue
			}
			body := strings.Join(e.Body, "\n")
			for i, p := range e.Params {
				if p.Type != ".u64" || p.Name != fmt.Sprintf("%s_param_%d", name, i) {
					t.Errorf("%s: parameter %d is %s %s", name, i, p.Type, p.Name)
				}
				// dst, a, b, n land in %rd1..%rd4, which the loop uses as such.
				if !strings.Contains(body, fmt.Sprintf("ld.param.u64 \t%%rd%d, [%s];", i+1, p.Name)) {
					t.Errorf("%s: parameter %d is not loaded into %%rd%d", name, i, i+1)
				}
			}
			size := el.Size()
			if !strings.Contains(body, "shl.b64 \t%rd7, %rd5, "+shift[size]+";") {
				t.Errorf("%s: the byte offset is not i << %s", name, shift[size])
			}
			ld := regexp.MustCompile(`ld\.global\.` + width[size] + ` \t%\w+, \[%rd(8|9)\];`)
			if n := len(ld.FindAllString(body, -1)); n != 2 {
				t.Errorf("%s: %d loads of a[i] and b[i] of %d bytes, want 2", name, n, size)
			}
			st := regexp.MustCompile(`st\.global\.` + width[size] + ` \t\[%rd10\], %\w+;`)
			if n := len(st.FindAllString(body, -1)); n != 1 {
				t.Errorf("%s: %d stores of dst[i] of %d bytes, want 1", name, n, size)
			}
			if strings.Contains(body, "ld.global.nc") {
				t.Errorf("%s: non-coherent loads, but dst may be a or b", name)
			}
			float := el == gpu.F16 || el == gpu.BF16 || el == gpu.F32 || el == gpu.F64
			if float && (op == ops.Sum || op == ops.Prod) && !strings.Contains(body, ".rn.") {
				t.Errorf("%s: floating-point arithmetic without explicit rounding (could be contracted)", name)
			}
			if float && (op == ops.Max || op == ops.Min) && !strings.Contains(body, "setp.nan.") {
				t.Errorf("%s: no NaN test", name)
			}
		}
	}
}

// Every datatype with a GPU kernel is a real MPI datatype of that size on
// which the op is allowed; the names round-trip.
func TestKernelTable(t *testing.T) {
	covered := map[gpu.Elem]bool{}
	for _, typ := range ops.Types() {
		el := gpu.ElemOf(typ)
		if el == gpu.ElemNone {
			continue
		}
		covered[el] = true
		if typ.Size() != el.Size() {
			t.Errorf("%v: size %d, kernel element %v of %d", typ, typ.Size(), el, el.Size())
		}
		for _, op := range gpu.ReduceOps {
			if ops.Allowed(op, typ) != (gpu.Kernel(op, typ) != "") {
				t.Errorf("%v %v: allowed %v, kernel %q", op, typ, ops.Allowed(op, typ), gpu.Kernel(op, typ))
			}
			o, e, ok := gpu.ParseKernelName(gpu.Kernel(op, typ))
			if !ok || o != op || e != el {
				t.Errorf("ParseKernelName(%s) = %v %v %v", gpu.Kernel(op, typ), o, e, ok)
			}
		}
		if gpu.Kernel(ops.Band, typ) != "" {
			t.Errorf("%v: a GPU kernel for MPI_BAND", typ)
		}
	}
	if len(covered) != len(gpu.Elems) {
		t.Errorf("element types with a datatype: %v", covered)
	}
}

// The module checker rejects what a JIT would.
func TestPTXCheckerRejects(t *testing.T) {
	good := gpu.PTX()
	for name, bad := range map[string]string{
		"unbalanced":        strings.Replace(good, "}", "", 1),
		"undeclared reg":    strings.Replace(good, "%rd10", "%rd99", 1),
		"undefined label":   strings.Replace(good, "bra.uni \t$L_gocoll_sum_f16_loop", "bra.uni \t$L_nowhere", 1),
		"missing semicolon": strings.Replace(good, "ret;", "ret", 1),
		"no target":         strings.Replace(good, ".target sm_70", "", 1),
		"bad param":         strings.Replace(good, "[gocoll_sum_f16_param_0]", "[gocoll_sum_f16_param_9]", 1),
		// What ptxas refuses (ptxtypes.go): types and operands.
		"float register in an integer op": strings.Replace(good, "add.s64 \t%rd8, %rd2, %rd7;", "add.s64 \t%f1, %rd2, %rd7;", 1),
		"32-bit register in a 64-bit op":  strings.Replace(good, "add.s64 \t%rd8, %rd2, %rd7;", "add.s64 \t%rd8, %r2, %rd7;", 1),
		"unknown instruction":             strings.Replace(good, "add.rn.f32", "add.rn.f23", 1),
		"unknown opcode":                  strings.Replace(good, "add.rn.f32", "addd.rn.f32", 1),
		"narrowing cvt without rounding":  strings.Replace(good, "cvt.rn.f16.f32", "cvt.f16.f32", 1),
		"integer op with rounding":        strings.Replace(good, "add.s32", "add.rn.s32", 1),
		"integer mul without .lo":         strings.Replace(good, "mul.lo.s32", "mul.s32", 1),
		"missing operand":                 strings.Replace(good, "selp.b32 \t%r7, %r5, %r7, %p2;", "selp.b32 \t%r7, %r5, %r7;", 1),
		"guard not a predicate":           strings.Replace(good, "@%p1 bra", "@%r1 bra", 1),
		"and on an unsigned type":         strings.Replace(good, "and.b32", "and.u32", 1),
		"short vector":                    regexp.MustCompile(`ld\.global\.v4\.b32 \t\{(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}`).ReplaceAllString(good, "ld.global.v4.b32 \t{$1, $2, $3}"),
		"unpack into 32-bit registers":    regexp.MustCompile(`mov\.b32 \t\{%h(\d+), %h(\d+)\}`).ReplaceAllString(good, "mov.b32 \t{%r$1, %r$2}"),
		"setp.nan on integers":            strings.Replace(good, "setp.ge.u64", "setp.nan.u64", 1),
	} {
		if bad == good {
			t.Errorf("%s: the mutation changed nothing", name)
		}
		if _, err := fake.ParsePTX(bad); err == nil {
			t.Errorf("%s: accepted", name)
		} else if testing.Verbose() {
			t.Logf("%s: %v", name, err)
		}
	}
}
