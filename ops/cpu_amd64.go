//go:build !purego

package ops

// CPU feature detection, from CPUID and XGETBV: an extension is usable only
// if the CPU has it and the operating system saves its registers.

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

func xgetbv0() (eax, edx uint32)

func supportedISAs() []isa {
	levels := []isa{isaGo}
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return levels
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const f16c, osxsave, avx = 1 << 29, 1 << 27, 1 << 28
	if ecx1&osxsave == 0 || ecx1&avx == 0 || ecx1&f16c == 0 {
		return levels
	}
	xcr0, _ := xgetbv0()
	const ymmState = 1<<1 | 1<<2        // SSE and AVX registers
	const zmmState = 1<<5 | 1<<6 | 1<<7 // opmask, upper ZMM0-15, ZMM16-31
	_, ebx7, _, _ := cpuid(7, 0)
	const avx2 = 1 << 5
	const avx512 = 1<<16 | 1<<17 | 1<<30 // F, DQ, BW
	if xcr0&ymmState != ymmState || ebx7&avx2 == 0 {
		return levels
	}
	levels = append(levels, isaAVX2)
	if xcr0&zmmState == zmmState && ebx7&avx512 == avx512 {
		levels = append(levels, isaAVX512)
	}
	return levels
}
