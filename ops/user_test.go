package ops

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// matmul is a non-commutative MPI_User_function on 2x2 int32 matrices (16
// bytes, row major): inout = in x inout.
func matmul(in, inout []byte, count int) {
	for e := range count {
		a := readMat(in[16*e:])
		b := readMat(inout[16*e:])
		writeMat(inout[16*e:], mulMat(a, b))
	}
}

type mat [4]int32

func readMat(p []byte) (m mat) {
	for i := range m {
		m[i] = int32(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return m
}

func writeMat(p []byte, m mat) {
	for i, v := range m {
		binary.LittleEndian.PutUint32(p[4*i:], uint32(v))
	}
}

func mulMat(a, b mat) mat {
	return mat{a[0]*b[0] + a[1]*b[2], a[0]*b[1] + a[1]*b[3], a[2]*b[0] + a[3]*b[2], a[2]*b[1] + a[3]*b[3]}
}

func matrices(n int, seed int32) []byte {
	p := make([]byte, 16*n)
	for e := range n {
		writeMat(p[16*e:], mat{seed + int32(e), 2 * seed, -1, seed*seed - int32(e)})
	}
	return p
}

func TestUserKernelOrderAndAliasing(t *testing.T) {
	k := UserKernel(matmul, 16)
	for _, n := range []int{0, 1, 3, 17} {
		x, y := matrices(n, 3), matrices(n, -5)
		want, self := make([]byte, 16*n), make([]byte, 16*n)
		for e := range n {
			writeMat(want[16*e:], mulMat(readMat(x[16*e:]), readMat(y[16*e:])))
			writeMat(self[16*e:], mulMat(readMat(x[16*e:]), readMat(x[16*e:])))
		}
		if n > 0 && bytes.Equal(want, func() []byte {
			r := make([]byte, 16*n)
			for e := range n {
				writeMat(r[16*e:], mulMat(readMat(y[16*e:]), readMat(x[16*e:])))
			}
			return r
		}()) {
			t.Fatal("test matrices commute")
		}
		for _, al := range aliasings {
			if got := al.run(k, clone(x), clone(y)); !bytes.Equal(got, want) {
				t.Errorf("n=%d, %s: got %v, want a x b", n, al.name, got)
			}
		}
		xx := clone(x)
		k(xx, xx, xx)
		if !bytes.Equal(xx, self) {
			t.Errorf("n=%d, dst=a=b: got %v, want a x a", n, xx)
		}
	}
}

// keepLeft is the simplest non-commutative op: a op b = a.
func keepLeft(in, inout []byte, count int) { copy(inout[:count*4], in) }

func TestUserKernelKeepLeft(t *testing.T) {
	k := UserKernel(keepLeft, 4)
	for _, al := range aliasings {
		x, y := u32b(1, 2, 3), u32b(7, 8, 9)
		if got := al.run(k, x, y); !bytes.Equal(got, u32b(1, 2, 3)) {
			t.Errorf("%s: got %v, want a", al.name, got)
		}
	}
}

func TestUserKernelAllocs(t *testing.T) {
	k := UserKernel(matmul, 16)
	x, y, d := matrices(64, 1), matrices(64, 2), make([]byte, 16*64)
	for _, c := range []struct {
		name      string
		dst, a, b []byte
	}{{"apart", d, x, y}, {"dst=a", x, x, y}, {"dst=b", y, x, y}, {"dst=a=b", x, x, x}} {
		if n := testing.AllocsPerRun(100, func() { k(c.dst, c.a, c.b) }); n != 0 {
			t.Errorf("%s: %v allocations per call", c.name, n)
		}
	}
}

func TestPredefinedKernelAllocs(t *testing.T) {
	x, y := make([]byte, 4096), make([]byte, 4096)
	for _, c := range []struct {
		op  Op
		typ Type
	}{{Sum, Double}, {Max, Float}, {Sum, Float16}, {Maxloc, DoubleInt}, {Prod, Integer16}, {Sum, Complex}} {
		k, err := Lookup(c.op, c.typ)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { k(y, x, y) }); n != 0 {
			t.Errorf("%v on %v: %v allocations per call", c.op, c.typ, n)
		}
	}
}
