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
