package ops

// The bitwise ops do not depend on the element type, so one kernel per op
// serves every integer width and MPI_BYTE. They work on 8-byte words and
// finish byte by byte.

func bandK(dst, a, b []byte) {
	w := len(dst) &^ 7
	d, x, y := view[uint64](dst[:w], a, b)
	for i := range d {
		d[i] = x[i] & y[i]
	}
	for i := w; i < len(dst); i++ {
		dst[i] = a[i] & b[i]
	}
}

func borK(dst, a, b []byte) {
	w := len(dst) &^ 7
	d, x, y := view[uint64](dst[:w], a, b)
	for i := range d {
		d[i] = x[i] | y[i]
	}
	for i := w; i < len(dst); i++ {
		dst[i] = a[i] | b[i]
	}
}

func bxorK(dst, a, b []byte) {
	w := len(dst) &^ 7
	d, x, y := view[uint64](dst[:w], a, b)
	for i := range d {
		d[i] = x[i] ^ y[i]
	}
	for i := w; i < len(dst); i++ {
		dst[i] = a[i] ^ b[i]
	}
}
