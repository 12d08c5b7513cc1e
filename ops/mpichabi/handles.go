// Package mpichabi holds the MPICH ABI's handle values of the predefined
// datatypes and ops, as package ops' Types and Ops: the values gocoll's
// own mpi.h uses too (capi), which the LD_PRELOAD library decodes when
// the host MPI is MPICH (preload), and the shm engine's C half decodes
// (intranode/engine/gen writes its tables).
package mpichabi

import "github.com/gocoll/gocoll/ops"

// Types maps the MPICH-ABI datatype handles to gocoll's datatypes.
var Types = map[uint32]ops.Type{
	0x4c000101: ops.Char, 0x4c000118: ops.SignedChar, 0x4c000102: ops.UnsignedChar,
	0x4c00010d: ops.Byte, 0x4c00040e: ops.WChar, 0x4c000203: ops.Short,
	0x4c000204: ops.UnsignedShort, 0x4c000405: ops.Int, 0x4c000406: ops.Unsigned,
	0x4c000807: ops.Long, 0x4c000808: ops.UnsignedLong, 0x4c00040a: ops.Float,
	0x4c00080b: ops.Double, 0x4c00100c: ops.LongDouble, 0x4c000809: ops.LongLong,
	0x4c000819: ops.UnsignedLongLong, 0x4c00010f: ops.Packed,
	0x8c000000: ops.FloatInt, 0x8c000001: ops.DoubleInt, 0x8c000002: ops.LongInt,
	0x8c000003: ops.ShortInt, 0x4c000816: ops.TwoInt, 0x8c000004: ops.LongDoubleInt,
	0x4c000137: ops.Int8, 0x4c000238: ops.Int16, 0x4c000439: ops.Int32, 0x4c00083a: ops.Int64,
	0x4c00013b: ops.Uint8, 0x4c00023c: ops.Uint16, 0x4c00043d: ops.Uint32, 0x4c00083e: ops.Uint64,
	0x4c00013f: ops.CBool, 0x4c000840: ops.CFloatComplex, 0x4c001041: ops.CDoubleComplex,
	0x4c002042: ops.CLongDoubleComplex, 0x4c000133: ops.CXXBool, 0x4c000834: ops.CXXFloatComplex,
	0x4c001035: ops.CXXDoubleComplex, 0x4c002036: ops.CXXLongDoubleComplex,
	0x4c000843: ops.Aint, 0x4c000844: ops.Offset, 0x4c000845: ops.Count,
	0x4c00011a: ops.Character, 0x4c00041d: ops.Logical, 0x4c00041b: ops.Integer,
	0x4c00041c: ops.Real, 0x4c00081f: ops.DoublePrecision, 0x4c00081e: ops.Complex,
	0x4c001022: ops.DoubleComplex, 0x4c000820: ops.TwoInteger, 0x4c000821: ops.TwoReal,
	0x4c001023: ops.TwoDoublePrecision, 0x4c00012d: ops.Integer1, 0x4c00022f: ops.Integer2,
	0x4c000430: ops.Integer4, 0x4c000831: ops.Integer8, 0x4c000427: ops.Real4,
	0x4c000829: ops.Real8, 0x4c00102b: ops.Real16, 0x4c000828: ops.Complex8,
	0x4c00102a: ops.Complex16, 0x4c00202c: ops.Complex32, 0x4c001049: ops.Integer16,
	0x4c000247: ops.Real2, 0x4c000448: ops.Complex4,
	0x4c000246: ops.Float16, 0x4c00024a: ops.BFloat16,
}

// Ops maps the MPICH-ABI op handles to gocoll's ops.
var Ops = map[uint32]ops.Op{
	0x58000001: ops.Max, 0x58000002: ops.Min, 0x58000003: ops.Sum, 0x58000004: ops.Prod,
	0x58000005: ops.Land, 0x58000006: ops.Band, 0x58000007: ops.Lor, 0x58000008: ops.Bor,
	0x58000009: ops.Lxor, 0x5800000a: ops.Bxor, 0x5800000b: ops.Minloc, 0x5800000c: ops.Maxloc,
}

// NotInMPICH40 are the handles of Types that MPICH 4.0 does not define
// (MPI_INTEGER16, MPI_REAL2, MPI_COMPLEX4, MPIX_BFLOAT16): asking that
// MPICH about one fails an assertion and aborts.
var NotInMPICH40 = map[uint32]bool{0x4c001049: true, 0x4c000247: true, 0x4c000448: true, 0x4c00024a: true}
