package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/ops/internal/cfloat"
)

// testCounts are the element counts every kernel is tested at: odd ones, so
// that the assembly tails are covered, and one past several whole 4-vector
// iterations for every element size.
var testCounts = []int{0, 1, 3, 17, 1003}

// aliasings are the ways a kernel's operands may share memory.
var aliasings = []struct {
	name string
	run  func(k Kernel, x, y []byte) []byte
}{
	{"apart", func(k Kernel, x, y []byte) []byte {
		d := make([]byte, len(x))
		k(d, x, y)
		return d
	}},
	{"dst=a", func(k Kernel, x, y []byte) []byte { k(x, x, y); return x }},
	{"dst=b", func(k Kernel, x, y []byte) []byte { k(y, x, y); return y }},
}

// TestKernels checks every allowed (op, datatype) pair, at every kernel
// level the CPU has, against the reference, for each aliasing of dst.
func TestKernels(t *testing.T) {
	var tables []*kernelTable
	for _, l := range supportedISAs() {
		tables = append(tables, newKernelTable(l))
	}
	for _, typ := range Types() {
		l, ok := testLayouts[typ]
		if !ok {
			t.Fatalf("no test layout for %v", typ)
		}
		for _, op := range Ops() {
			if !Allowed(op, typ) {
				continue
			}
			if isCKind(typ.kind()) && !cfloat.Available {
				continue
			}
			t.Run(fmt.Sprintf("%v/%v", op, typ), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(typ), uint64(op)))
				for _, n := range testCounts {
					x, y := make([]byte, n*l.size), make([]byte, n*l.size)
					for e := 0; e < n; e++ {
						copy(x[e*l.size:], genElement(r, l))
						copy(y[e*l.size:], genElement(r, l))
					}
					wants := make([][]want, n)
					self := make([][]want, n) // x op x
					for e := range n {
						xe, ye := x[e*l.size:(e+1)*l.size], y[e*l.size:(e+1)*l.size]
						wants[e] = refElement(op, l, xe, ye)
						self[e] = refElement(op, l, xe, xe)
					}
					for _, tbl := range tables {
						k := tbl.table[op][typ.kind()]
						if k == nil {
							t.Fatalf("%v: no kernel", tbl.isa)
						}
						for _, al := range aliasings {
							got := al.run(k, clone(x), clone(y))
							where := fmt.Sprintf("%v, %s, n=%d", tbl.isa, al.name, n)
							checkElems(t, where, l, got, x, y, wants)
						}
						xx := clone(x) // dst, a and b all one slice
						k(xx, xx, xx)
						checkElems(t, fmt.Sprintf("%v, dst=a=b, n=%d", tbl.isa, n), l, xx, x, x, self)
					}
				}
			})
		}
	}
}

func isCKind(k kind) bool {
	return k == kF80 || k == kF128 || k == kC80 || k == kC256 || k == kPairF80I32
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// checkElems reports the first few elements of got that miss their wants.
func checkElems(t *testing.T, where string, l layout, got, x, y []byte, wants [][]want) {
	t.Helper()
	bad := 0
	for e, ws := range wants {
		elem := got[e*l.size : (e+1)*l.size]
		for _, w := range ws {
			if !w.check(elem) {
				if bad < 3 {
					t.Errorf("%s: element %d: a % x, b % x: got % x, want %v", where, e,
						x[e*l.size:(e+1)*l.size], y[e*l.size:(e+1)*l.size], elem, w)
				}
				bad++
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d more mismatches", where, bad-3)
	}
}

// TestUnaligned runs some assembly kernels on slices that start at every
// byte offset: the result must not depend on alignment.
func TestUnaligned(t *testing.T) {
	for _, c := range []struct {
		op  Op
		typ Type
	}{{Sum, Double}, {Max, Float}, {Sum, Float16}, {Min, BFloat16}, {Prod, Int32}, {Bxor, Byte}} {
		l := testLayouts[c.typ]
		n := 301 * l.size
		r := rand.New(rand.NewPCG(1, uint64(c.typ)))
		x, y := make([]byte, n), make([]byte, n)
		for e := 0; e < n; e += l.size {
			copy(x[e:], genElement(r, l))
			copy(y[e:], genElement(r, l))
		}
		for _, lv := range supportedISAs() {
			k := newKernelTable(lv).table[c.op][c.typ.kind()]
			want := make([]byte, n)
			k(want, x, y)
			for off := 1; off < 8; off++ {
				bx, by := make([]byte, n+off), make([]byte, n+off)
				copy(bx[off:], x)
				copy(by[off:], y)
				k(by[off:], bx[off:], by[off:])
				if string(by[off:]) != string(want) {
					t.Errorf("%v on %v (%v), offset %d: results differ", c.op, c.typ, lv, off)
				}
			}
		}
	}
}
