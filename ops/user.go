package ops

// UserFunc is an MPI_User_function: for i < count, inout[i] = in[i] op
// inout[i], elements being elemSize bytes (see UserKernel). in is the left
// operand, which matters when op is not commutative. in and inout never
// overlap.
type UserFunc func(in, inout []byte, count int)

// UserKernel adapts a user function on elements of elemSize bytes to a
// Kernel: dst = a op b, with a passed as in. The kernel copies operands
// where it must so that dst may be a or b, as every Kernel allows, while f
// sees distinct in and inout. A copy of a is kept in a buffer that the
// kernel reuses, so that it allocates nothing in steady state.
//
// The returned Kernel is not safe for concurrent use: call it from one
// goroutine at a time (a communicator runs one collective at a time), or
// make one kernel per goroutine. It panics if elemSize is not positive.
func UserKernel(f UserFunc, elemSize int) Kernel {
	if elemSize <= 0 {
		panic("ops: UserKernel with a non-positive element size")
	}
	u := &userKernel{f: f, size: elemSize}
	return u.reduce
}

type userKernel struct {
	f    UserFunc
	size int
	tmp  []byte // copy of a, when dst or b is a
}

func (u *userKernel) reduce(dst, a, b []byte) {
	n := len(dst) / u.size * u.size
	if n == 0 {
		return
	}
	dst, a, b = dst[:n], a[:n], b[:n]
	count := n / u.size
	switch {
	case &dst[0] == &b[0] && &a[0] != &b[0]:
		u.f(a, dst, count) // the common in-place case: no copy
	case &dst[0] == &b[0]: // a, b and dst are one slice
		u.f(u.saved(a), dst, count)
	case &dst[0] == &a[0]:
		in := u.saved(a)
		copy(dst, b)
		u.f(in, dst, count)
	default: // dst is apart from a and b (which may be one slice)
		copy(dst, b)
		u.f(a, dst, count)
	}
}

// saved returns a copy of a in the reused buffer.
func (u *userKernel) saved(a []byte) []byte {
	if cap(u.tmp) < len(a) {
		u.tmp = make([]byte, len(a))
	}
	t := u.tmp[:len(a)]
	copy(t, a)
	return t
}
