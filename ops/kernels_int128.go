package ops

import "math/bits"

// int128 is a Fortran INTEGER*16: two's complement, little endian.
type int128 struct{ lo, hi uint64 }

// int128Kernel returns the kernel of op on 16-byte integers, or nil. The
// standard allows no logical op on Fortran integers.
func int128Kernel(op Op) Kernel {
	switch op {
	case Sum:
		return sum128K
	case Prod:
		return prod128K
	case Max:
		return max128K
	case Min:
		return min128K
	case Band:
		return bandK
	case Bor:
		return borK
	case Bxor:
		return bxorK
	}
	return nil
}

func sum128K(dst, a, b []byte) {
	d, x, y := view[int128](dst, a, b)
	for i := range d {
		lo, c := bits.Add64(x[i].lo, y[i].lo, 0)
		hi, _ := bits.Add64(x[i].hi, y[i].hi, c)
		d[i] = int128{lo, hi}
	}
}

// prod128K keeps the low 128 bits of the product, which are the same for
// signed and unsigned operands.
func prod128K(dst, a, b []byte) {
	d, x, y := view[int128](dst, a, b)
	for i := range d {
		hi, lo := bits.Mul64(x[i].lo, y[i].lo)
		hi += x[i].lo*y[i].hi + x[i].hi*y[i].lo
		d[i] = int128{lo, hi}
	}
}

func (x int128) less(y int128) bool {
	if x.hi != y.hi {
		return int64(x.hi) < int64(y.hi)
	}
	return x.lo < y.lo
}

func max128K(dst, a, b []byte) {
	d, x, y := view[int128](dst, a, b)
	for i := range d {
		if x[i].less(y[i]) {
			d[i] = y[i]
		} else {
			d[i] = x[i]
		}
	}
}

func min128K(dst, a, b []byte) {
	d, x, y := view[int128](dst, a, b)
	for i := range d {
		if y[i].less(x[i]) {
			d[i] = y[i]
		} else {
			d[i] = x[i]
		}
	}
}
