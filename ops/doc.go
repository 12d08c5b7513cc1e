// Package ops holds MPI's predefined datatypes, its predefined reduction
// ops, and the kernels that apply an op to two buffers of a datatype:
// dst[i] = a[i] op b[i]. Collective algorithms call a Kernel for every
// local reduce step; this package decides what each step computes.
//
// # Datatypes
//
// A Type is one of MPI's predefined datatypes (MPI_INT, MPI_DOUBLE_INT,
// MPI_COMPLEX16, ...) or one of two 16-bit extensions, Float16 (IEEE
// binary16, MPICH's MPIX_C_FLOAT16) and BFloat16. Sizes and layouts are
// those of Linux x86-64 with gcc and gfortran: long is 8 bytes; long double
// is the x87 80-bit format in 16 bytes; Fortran INTEGER, REAL and LOGICAL
// are 4 bytes; REAL*16 is IEEE binary128 and REAL*2 binary16; the pair
// types are C structs with their padding (MPI_DOUBLE_INT is a double, an
// int and 4 bytes of padding: 16 bytes).
//
// # Classes and allowed pairs
//
// The standard (MPI-4.0 section 6.9.2) sorts datatypes into classes and
// allows each op on some classes only; Type.Class returns the class and
// Allowed applies the table:
//
//	op                          C int  Fortran int  floating  logical  complex  byte  multi-language  pair
//	MPI_MAX, MPI_MIN              x        x           x                                 x
//	MPI_SUM, MPI_PROD             x        x           x                 x               x
//	MPI_LAND, MPI_LOR, MPI_LXOR   x                             x                        x
//	MPI_BAND, MPI_BOR, MPI_BXOR   x        x                                      x      x
//	MPI_MAXLOC, MPI_MINLOC                                                                        x
//
// Multi-language is MPI_AINT, MPI_OFFSET and MPI_COUNT, allowed wherever C
// integers are. Note the logical ops: they take C integers but not Fortran
// ones. MPI_CHAR, MPI_WCHAR, MPI_PACKED and MPI_CHARACTER are in no class
// (ClassNone): they can be gathered, never reduced. Lookup returns an
// *Error naming the op and the datatype for every pair the table forbids.
//
// # What the kernels compute
//
// Integers wrap around in two's complement for MPI_SUM and MPI_PROD, at
// every width; MPI_MAX and MPI_MIN compare unsigned types as unsigned (some
// MPI libraries compare them as signed: a value of 2^31 or more in an
// MPI_UNSIGNED then loses to 1; not here). Fortran INTEGER*16 is a full
// 128-bit integer. The logical ops, on integers and on the logical types,
// treat any non-zero element as true and store 1 or 0. The bitwise ops act
// on the bytes.
//
// Floating-point MPI_SUM and MPI_PROD are one IEEE operation per element,
// rounded to nearest even in the element's format. Float16 and BFloat16 are
// computed in float32 and rounded once to 16 bits, which gives the
// correctly rounded result (float32 carries more than twice their precision
// plus two bits); subnormals, infinities and NaNs are handled. long double
// (and its complex type and MPI_LONG_DOUBLE_INT) and binary128 (REAL*16,
// COMPLEX*32) are computed in C by package ops/internal/cfloat, with gcc's
// own long double and _Float128, so results are exactly the hardware's and
// libgcc's; those kernels exist only in builds with cgo on amd64, and
// elsewhere Lookup reports them missing.
//
// Complex MPI_SUM adds the parts; MPI_PROD is (ac-bd) + (ad+bc)i with each
// product and each sum rounded to the part's format (for MPI_COMPLEX4, to
// float32 and then to binary16), without the infinity recovery of C's
// Annex G.
//
// # MAX and MIN are deterministic
//
// Reductions combine contributions in an order that depends on the
// algorithm, so MPI_MAX and MPI_MIN must give the same bits whatever the
// order of their operands. On floats:
//
//   - if either operand is a NaN, the result is the canonical NaN: positive,
//     quiet, zero payload (0x7ff8000000000000 for a double, 0x7fc00000 for
//     a float, 0x7e00 for binary16, 0x7fc0 for bfloat16), never one of the
//     operands, whose payloads may differ;
//   - +0 is above -0: max(+0, -0) = +0 and min(+0, -0) = -0 in either
//     order, as Go's max and min.
//
// The x86 instructions do neither (VMAXPD returns its second operand when
// the operands are equal or unordered); the assembly fixes both up.
// MPI_MAXLOC keeps the larger value and its index, and on equal values the
// smaller index; MPI_MINLOC mirrors it. There a NaN value wins over any
// number, two NaNs tie, and +0 and -0 tie (the value kept is MPI_MAX's or
// MPI_MIN's). So every predefined op is commutative; floating-point
// MPI_SUM and MPI_PROD are not associative, and results may still differ in
// the last bits between algorithms.
//
// # Reductions of p contributions
//
// A Reduction (ReductionOf, UserReduction) combines the contributions of p
// ranks element by element in the canonical association of reproducible
// mode, T(0, p) (algorithms/canonical.go), through a stack of partials per
// 8 KiB chunk: the p-1 kernel calls of a fold, in the order of a binary
// counter. MPI_SUM and MPI_PROD on float16, bfloat16 and MPI_COMPLEX4
// accumulate in float32 there and round once. CanonicalReduce is the same
// computation on slices: the reference tests compare reproducible results
// with. The shm engine (package intranode) reduces with it.
//
// # Kernels and their speed
//
// A Kernel is a func(dst, a, b []byte); dst may be a or b. The portable
// kernels are generic Go loops over the bytes viewed as the element type,
// with no allocation and no per-element indirection. On amd64 the hot
// kernels are assembly: MPI_SUM, MPI_PROD, MPI_MAX and MPI_MIN on float,
// double, binary16 and bfloat16 (converted to float32 in registers, with
// the same rounding as the Go kernels) and on the 8- to 64-bit integers
// (where the instruction set has the instruction: no 8-bit product, and
// 64-bit product, MAX and MIN only with AVX-512), complex MPI_SUM, and the
// bitwise ops on every integer and MPI_BYTE. mkasm.go writes them, 4
// vectors per iteration, in an AVX2 and an AVX-512 version; a Go kernel
// finishes the elements after the last whole vector.
//
// At start-up the package reads CPUID and XGETBV and takes the best level
// that the CPU and the operating system support: "avx512" (AVX-512 F, DQ
// and BW), "avx2" (AVX2 and F16C), or "go" (portable Go). CapISA caps it,
// to compare levels or to rule out a suspect one: the front ends pass it
// GOCOLL_OPS_ISA at initialisation. ISA reports the level in use. The
// purego build tag, or any other architecture, leaves only the portable
// Go kernels.
//
// Long double and binary128 kernels cost one cgo call per Kernel call
// (some tens of nanoseconds) and loop in C.
//
// # User-defined ops
//
// UserKernel adapts an MPI_User_function, inout = in op inout, to a Kernel
// with a as the left operand, copying where needed so that dst may alias a
// or b. It keeps a scratch buffer: one such kernel serves one goroutine at
// a time.
package ops
