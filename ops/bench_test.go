package ops

import (
	"fmt"
	"testing"
)

// The benchmarks report GB/s of dst (b.SetBytes is the size of dst), with
// dst aliasing b as in an in-place reduction step, next to copy() (Go's
// memmove) of the same size: a kernel reads two buffers and writes one,
// memmove reads one and writes one.

var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}

func benchBuffers(n int) (x, y []byte) {
	x, y = make([]byte, n), make([]byte, n)
	for i := range x {
		x[i], y[i] = byte(i%7+1), byte(i%5+1)
	}
	return x, y
}

func BenchmarkMemmove(b *testing.B) {
	for _, s := range benchSizes {
		x, y := benchBuffers(s.n)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n))
			for b.Loop() {
				copy(y, x)
			}
		})
	}
}

var benchKernels = []struct {
	op  Op
	typ Type
}{{Sum, Float}, {Sum, Double}, {Sum, Int32}, {Sum, Int64}, {Max, Double}}

// BenchmarkKernel runs each kernel at each level the CPU has: go (portable
// Go), avx2, avx512.
func BenchmarkKernel(b *testing.B) {
	for _, bk := range benchKernels {
		for _, l := range supportedISAs() {
			k := newKernelTable(l).table[bk.op][bk.typ.kind()]
			for _, s := range benchSizes {
				x, y := benchBuffers(s.n)
				name := fmt.Sprintf("%v_%v/%v/%s", bk.op, bk.typ, l, s.name)
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(s.n))
					for b.Loop() {
						k(y, x, y)
					}
				})
			}
		}
	}
}

// BenchmarkOther runs the kernels without assembly at 64 KiB, with the
// level in use, for scale.
func BenchmarkOther(b *testing.B) {
	const n = 64 << 10
	for _, bk := range []struct {
		op  Op
		typ Type
	}{{Sum, Float16}, {Sum, BFloat16}, {Prod, Complex}, {Prod, DoubleComplex},
		{Maxloc, DoubleInt}, {Sum, Integer16}, {Land, Int}, {Sum, LongDouble}, {Sum, Real16}} {
		k, err := Lookup(bk.op, bk.typ)
		if err != nil {
			continue
		}
		x, y := benchBuffers(n)
		b.Run(fmt.Sprintf("%v_%v", bk.op, bk.typ), func(b *testing.B) {
			b.SetBytes(n)
			for b.Loop() {
				k(y, x, y)
			}
		})
	}
}
