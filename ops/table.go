package ops

import "github.com/gocoll/gocoll/envvar"

// EnvISA names the environment variable that caps the instruction set the
// kernels use: "go" (portable Go only), "avx2" or "avx512". Unset, or set
// to a level the CPU lacks, the best level the CPU and the build support
// is used. Package envvar parses it (Settings.OpsISA): an invalid value
// is the error MPI_Init reports, and leaves the kernels at the best level.
const EnvISA = "GOCOLL_OPS_ISA"

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
}

// active is the table Lookup reads, built once at start-up.
var active = newKernelTable(selectISA(settingISA()))

// settingISA is GOCOLL_OPS_ISA as package envvar parsed it. Its error,
// if any, is for the callers of envvar.FromEnv to report: the kernels
// cannot, at initialisation.
func settingISA() string {
	s, _ := envvar.FromEnv()
	return s.OpsISA
}

// ISA returns the name of the kernel level in use: "avx512", "avx2" or "go".
func ISA() string { return active.isa.String() }

// selectISA returns the best level the CPU supports, capped by the level
// named in env if it names one.
func selectISA(env string) isa {
	best := isaGo
	for _, l := range supportedISAs() {
		best = max(best, l)
	}
	for l, name := range isaNames {
		if env == name {
			return min(best, isa(l))
		}
	}
	return best
}

func newKernelTable(level isa) *kernelTable {
	t := &kernelTable{isa: level}
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
