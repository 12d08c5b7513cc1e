package ops

// integer is every fixed-width Go integer. Go's integer arithmetic wraps
// around in two's complement for every width and signedness, which is what
// MPI_SUM and MPI_PROD need, and compares unsigned types as unsigned.
type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// intKernel returns the kernel of op on integers of type T, or nil. It
// serves the logical types too: MPI_C_BOOL is a uint8 and MPI_LOGICAL a
// uint32 for MPI_LAND, MPI_LOR and MPI_LXOR.
func intKernel[T integer](op Op) Kernel {
	switch op {
	case Sum:
		return sumK[T]
	case Prod:
		return prodK[T]
	case Max:
		return maxIntK[T]
	case Min:
		return minIntK[T]
	case Land:
		return landK[T]
	case Lor:
		return lorK[T]
	case Lxor:
		return lxorK[T]
	case Band:
		return bandK
	case Bor:
		return borK
	case Bxor:
		return bxorK
	}
	return nil
}

// number is every type + and * apply to element by element.
type number interface {
	integer | ~float32 | ~float64
}

func sumK[T number](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	for i := range d {
		d[i] = x[i] + y[i]
	}
}

func prodK[T number](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	for i := range d {
		d[i] = x[i] * y[i]
	}
}

func maxIntK[T integer](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	for i := range d {
		d[i] = max(x[i], y[i])
	}
}

func minIntK[T integer](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	for i := range d {
		d[i] = min(x[i], y[i])
	}
}

// The logical ops treat any non-zero element as true and store 1 or 0.

func landK[T integer](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	for i := range d {
		d[i] = truth[T](x[i] != 0 && y[i] != 0)
	}
}

func lorK[T integer](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	for i := range d {
		d[i] = truth[T](x[i] != 0 || y[i] != 0)
	}
}

func lxorK[T integer](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	for i := range d {
		d[i] = truth[T]((x[i] != 0) != (y[i] != 0))
	}
}

func truth[T integer](v bool) T {
	if v {
		return 1
	}
	return 0
}
