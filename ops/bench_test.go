package ops

import (
	"bytes"
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

// BenchmarkReduction reduces p contributions of a shared-memory slot's
// size, as the shm engine's owner does: "fold" is the left-to-right fold
// through the pairwise kernel (x0 op x1, then op x2, ... into dst), "tree"
// the canonical Reduction. SetBytes is one contribution.
func BenchmarkReduction(b *testing.B) {
	for _, typ := range []Type{Double, Float, Float16, BFloat16} {
		k, _ := Lookup(Sum, typ)
		r, _ := ReductionOf(Sum, typ)
		for _, p := range []int{2, 4, 8} {
			for _, n := range []int{4 << 10, 128 << 10} {
				parts := make([][]byte, p)
				for q := range parts {
					parts[q] = bytes.Repeat([]byte{0x3c + byte(q)}, n) // normal numbers in every type
				}
				dst := make([]byte, n)
				b.Run(fmt.Sprintf("%v/p=%d/%dKiB/fold", typ, p, n>>10), func(b *testing.B) {
					b.SetBytes(int64(n))
					for b.Loop() {
						k(dst, parts[0], parts[1])
						for q := 2; q < p; q++ {
							k(dst, dst, parts[q])
						}
					}
				})
				var scratch []byte
				b.Run(fmt.Sprintf("%v/p=%d/%dKiB/tree", typ, p, n>>10), func(b *testing.B) {
					b.SetBytes(int64(n))
					for b.Loop() {
						scratch = r.Reduce(dst, parts, scratch)
					}
				})
			}
		}
	}
}
