//go:build !purego

package ops

//go:generate go run mkasm.go

// vecEntry says which (op, kinds) an assembly kernel serves. The kernels
// and their tables are in asm_amd64.go, written by mkasm.go.
type vecEntry struct {
	op     Op
	kinds  []kind
	kernel Kernel
}

// asmKernel returns the assembly kernel of op on kind k at a level, or nil.
func asmKernel(level isa, op Op, k kind) Kernel {
	entries := vecAVX2
	if level == isaAVX512 {
		entries = vecAVX512
	}
	for _, e := range entries {
		if e.op != op {
			continue
		}
		for _, ek := range e.kinds {
			if ek == k {
				return e.kernel
			}
		}
	}
	return nil
}

// convEntry holds a level's conversions between 16-bit floats and float32
// buffers (mkasm.go writes one per level).
type convEntry struct {
	widenF16, narrowF16, widenBF16, narrowBF16         func(dst, src []byte)
	sumF16To32, prodF16To32, sumBF16To32, prodBF16To32 Kernel
}

// asmWidenings returns the widenings of a level, or nil for portable Go.
func asmWidenings(level isa) (f16, bf16 *widening) {
	c := convAVX2
	switch level {
	case isaGo:
		return nil, nil
	case isaAVX512:
		c = convAVX512
	}
	return &widening{c.widenF16, c.narrowF16, c.sumF16To32, c.prodF16To32},
		&widening{c.widenBF16, c.narrowBF16, c.sumBF16To32, c.prodBF16To32}
}
