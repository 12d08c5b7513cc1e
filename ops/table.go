package ops

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// isa is a level of kernels: portable Go, or assembly for an x86-64
// extension. Every level has a kernel for every allowed pair; a level only
// replaces some of the Go kernels with faster ones.
type isa uint8

const (
	isaGo isa = iota
	isaAVX2
	isaAVX512
	numISAs
)

var isaNames = [numISAs]string{isaGo: "go", isaAVX2: "avx2", isaAVX512: "avx512"}

func (l isa) String() string { return isaNames[l] }

// kernelTable holds the kernel of every (op, kind) of one level; nil where
// there is none.
type kernelTable struct {
	isa   isa
	table [numOps][numKinds]Kernel
	// f16 and bf16 are the level's widenings of 16-bit floats.
	f16, bf16 *widening
}

// active is the table Lookup reads: the best level's from start-up, then
// the one CapISA sets.
var active atomic.Pointer[kernelTable]

func init() { active.Store(newKernelTable(bestISA())) }

// CapISA caps the instruction set of the kernels that Lookup and
// ReductionOf return from now on: "go" (portable Go only), "avx2" or
// "avx512"; "" or "best" lifts the cap. A level the CPU or the build
// lacks leaves the best one it has. The front ends (the C ABI, the
// preload, the Go API) call it at initialisation with GOCOLL_OPS_ISA
// (envvar.Settings.OpsISA): the package reads no environment. Kernels
// and Reductions looked up before keep theirs. An unknown level is an
// error, and changes nothing.
func CapISA(level string) error {
	l := bestISA()
	if level != "" && level != "best" {
		i := slices.Index(isaNames[:], level)
		if i < 0 {
			return fmt.Errorf("ops: instruction set %q: want best, avx512, avx2 or go", level)
		}
		l = min(l, isa(i))
	}
	if active.Load().isa != l {
		active.Store(newKernelTable(l))
	}
	return nil
}

// ISA returns the name of the kernel level in use: "avx512", "avx2" or "go".
func ISA() string { return active.Load().isa.String() }

// bestISA returns the best level the CPU and the build support.
func bestISA() isa {
	best := isaGo
	for _, l := range supportedISAs() {
		best = max(best, l)
	}
	return best
}

func newKernelTable(level isa) *kernelTable {
	t := &kernelTable{isa: level}
	t.f16, t.bf16 = widenings(level)
	for op := Op(1); op < numOps; op++ {
		for k := kind(1); k < numKinds; k++ {
			g := goKernel(op, k)
			if g != nil && level > isaGo {
				if a := asmKernel(level, op, k); a != nil {
					g = a
				}
			}
			t.table[op][k] = g
		}
	}
	return t
}

// goKernel returns the portable kernel of op on kind k, or nil. It answers
// for every op a kind supports, beyond what the standard allows for some
// datatypes of that kind (MPI_INTEGER is a kI32 but takes no MPI_LAND);
// Lookup checks the standard first.
func goKernel(op Op, k kind) Kernel {
	switch k {
	case kByte:
		if op == Band || op == Bor || op == Bxor {
			return intKernel[uint8](op)
		}
		return nil
	case kBool8:
		if op == Land || op == Lor || op == Lxor {
			return intKernel[uint8](op)
		}
		return nil
	case kBool32:
		if op == Land || op == Lor || op == Lxor {
			return intKernel[uint32](op)
		}
		return nil
	case kI8:
		return intKernel[int8](op)
	case kU8:
		return intKernel[uint8](op)
	case kI16:
		return intKernel[int16](op)
	case kU16:
		return intKernel[uint16](op)
	case kI32:
		return intKernel[int32](op)
	case kU32:
		return intKernel[uint32](op)
	case kI64:
		return intKernel[int64](op)
	case kU64:
		return intKernel[uint64](op)
	case kI128:
		return int128Kernel(op)
	case kF16:
		return halfKernel(op, false)
	case kBF16:
		return halfKernel(op, true)
	case kF32:
		return floatKernel[float32](op)
	case kF64:
		return floatKernel[float64](op)
	case kC16:
		return complexHalfKernel(op)
	case kC64:
		return complexKernel[float32](op)
	case kC128:
		return complexKernel[float64](op)
	case kPairF32I32:
		return pairKernel[float32, int32](op)
	case kPairF64I32:
		return pairKernel[float64, int32](op)
	case kPairI64I32:
		return pairKernel[int64, int32](op)
	case kPairI32I32:
		return pairKernel[int32, int32](op)
	case kPairI16I32:
		return pairKernel[int16, int32](op)
	case kPairF32F32:
		return pairKernel[float32, float32](op)
	case kPairF64F64:
		return pairKernel[float64, float64](op)
	case kF80, kF128, kC80, kC256, kPairF80I32:
		return cKernel(op, k)
	}
	return nil
}
