//go:build !amd64 || purego

package ops

// Without assembly (another architecture, or the purego build tag) every
// kernel is the portable Go one.

func supportedISAs() []isa { return []isa{isaGo} }

func asmKernel(isa, Op, kind) Kernel { return nil }

func asmWidenings(isa) (f16, bf16 *widening) { return nil, nil }
