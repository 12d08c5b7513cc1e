package ops

// halfKernel returns the kernel of op on binary16 (bf false) or bfloat16
// (bf true) elements, or nil. Each element is widened to float32, combined
// with the float32 semantics (fmax, fmin: canonical NaN, signed zeros) and
// rounded back once.
func halfKernel(op Op, bf bool) Kernel {
	if bf {
		switch op {
		case Sum:
			return sumBF16K
		case Prod:
			return prodBF16K
		case Max:
			return maxBF16K
		case Min:
			return minBF16K
		}
		return nil
	}
	switch op {
	case Sum:
		return sumF16K
	case Prod:
		return prodF16K
	case Max:
		return maxF16K
	case Min:
		return minF16K
	}
	return nil
}

func sumF16K(dst, a, b []byte) {
	d, x, y := view[uint16](dst, a, b)
	for i := range d {
		d[i] = f32ToF16(f16ToF32(x[i]) + f16ToF32(y[i]))
	}
}

func prodF16K(dst, a, b []byte) {
	d, x, y := view[uint16](dst, a, b)
	for i := range d {
		d[i] = f32ToF16(f16ToF32(x[i]) * f16ToF32(y[i]))
	}
}

func maxF16K(dst, a, b []byte) {
	d, x, y := view[uint16](dst, a, b)
	for i := range d {
		d[i] = f32ToF16(fmax(f16ToF32(x[i]), f16ToF32(y[i])))
	}
}

func minF16K(dst, a, b []byte) {
	d, x, y := view[uint16](dst, a, b)
	for i := range d {
		d[i] = f32ToF16(fmin(f16ToF32(x[i]), f16ToF32(y[i])))
	}
}

func sumBF16K(dst, a, b []byte) {
	d, x, y := view[uint16](dst, a, b)
	for i := range d {
		d[i] = f32ToBF16(bf16ToF32(x[i]) + bf16ToF32(y[i]))
	}
}

func prodBF16K(dst, a, b []byte) {
	d, x, y := view[uint16](dst, a, b)
	for i := range d {
		d[i] = f32ToBF16(bf16ToF32(x[i]) * bf16ToF32(y[i]))
	}
}

func maxBF16K(dst, a, b []byte) {
	d, x, y := view[uint16](dst, a, b)
	for i := range d {
		d[i] = f32ToBF16(fmax(bf16ToF32(x[i]), bf16ToF32(y[i])))
	}
}

func minBF16K(dst, a, b []byte) {
	d, x, y := view[uint16](dst, a, b)
	for i := range d {
		d[i] = f32ToBF16(fmin(bf16ToF32(x[i]), bf16ToF32(y[i])))
	}
}

// complexHalfKernel returns the kernel of op on MPI_COMPLEX4, two binary16
// parts, or nil. The product is computed in float32 (the partial products
// are exact there) and each part rounded once.
func complexHalfKernel(op Op) Kernel {
	switch op {
	case Sum:
		return sumF16K
	case Prod:
		return cprodF16K
	}
	return nil
}

func cprodF16K(dst, a, b []byte) {
	d, x, y := view[[2]uint16](dst, a, b)
	for i := range d {
		p := cmul(
			[2]float32{f16ToF32(x[i][0]), f16ToF32(x[i][1])},
			[2]float32{f16ToF32(y[i][0]), f16ToF32(y[i][1])})
		d[i] = [2]uint16{f32ToF16(p[0]), f32ToF16(p[1])}
	}
}
