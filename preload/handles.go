package main

/*
#include <stdlib.h>
#include "preload.h"
*/
import "C"

import (
	"cmp"
	"slices"
	"unsafe"

	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/ops/mpichabi"
)

// Open MPI's predefined datatypes and ops are global objects; a handle is
// an object's address, found at run time by name (gc_sym_handle, which
// prefers the executable's copy-relocated object, the one the
// application's handles point at). Datatypes gocoll has no ops.Type for
// (MPI_LOGICAL1, MPI_2COMPLEX, ...) are absent and fall back to the host.
var ompiTypes = map[string]ops.Type{
	"ompi_mpi_char": ops.Char, "ompi_mpi_signed_char": ops.SignedChar, "ompi_mpi_unsigned_char": ops.UnsignedChar,
	"ompi_mpi_byte": ops.Byte, "ompi_mpi_wchar": ops.WChar, "ompi_mpi_short": ops.Short,
	"ompi_mpi_unsigned_short": ops.UnsignedShort, "ompi_mpi_int": ops.Int, "ompi_mpi_unsigned": ops.Unsigned,
	"ompi_mpi_long": ops.Long, "ompi_mpi_unsigned_long": ops.UnsignedLong, "ompi_mpi_long_long_int": ops.LongLong,
	"ompi_mpi_unsigned_long_long": ops.UnsignedLongLong, "ompi_mpi_float": ops.Float, "ompi_mpi_double": ops.Double,
	"ompi_mpi_long_double": ops.LongDouble, "ompi_mpi_packed": ops.Packed,
	"ompi_mpi_int8_t": ops.Int8, "ompi_mpi_int16_t": ops.Int16, "ompi_mpi_int32_t": ops.Int32, "ompi_mpi_int64_t": ops.Int64,
	"ompi_mpi_uint8_t": ops.Uint8, "ompi_mpi_uint16_t": ops.Uint16, "ompi_mpi_uint32_t": ops.Uint32, "ompi_mpi_uint64_t": ops.Uint64,
	"ompi_mpi_aint": ops.Aint, "ompi_mpi_offset": ops.Offset, "ompi_mpi_count": ops.Count,
	"ompi_mpi_c_bool": ops.CBool, "ompi_mpi_c_float_complex": ops.CFloatComplex,
	"ompi_mpi_c_double_complex": ops.CDoubleComplex, "ompi_mpi_c_long_double_complex": ops.CLongDoubleComplex,
	"ompi_mpi_cxx_bool": ops.CXXBool, "ompi_mpi_cxx_cplex": ops.CXXFloatComplex,
	"ompi_mpi_cxx_dblcplex": ops.CXXDoubleComplex, "ompi_mpi_cxx_ldblcplex": ops.CXXLongDoubleComplex,
	"ompi_mpi_float_int": ops.FloatInt, "ompi_mpi_double_int": ops.DoubleInt, "ompi_mpi_long_int": ops.LongInt,
	"ompi_mpi_2int": ops.TwoInt, "ompi_mpi_short_int": ops.ShortInt, "ompi_mpi_longdbl_int": ops.LongDoubleInt,
	// Fortran
	"ompi_mpi_character": ops.Character, "ompi_mpi_logical": ops.Logical, "ompi_mpi_logical4": ops.Logical,
	"ompi_mpi_integer": ops.Integer, "ompi_mpi_real": ops.Real, "ompi_mpi_dblprec": ops.DoublePrecision,
	"ompi_mpi_cplex": ops.Complex, "ompi_mpi_dblcplex": ops.DoubleComplex,
	"ompi_mpi_integer1": ops.Integer1, "ompi_mpi_integer2": ops.Integer2, "ompi_mpi_integer4": ops.Integer4,
	"ompi_mpi_integer8": ops.Integer8, "ompi_mpi_integer16": ops.Integer16,
	"ompi_mpi_real2": ops.Real2, "ompi_mpi_real4": ops.Real4, "ompi_mpi_real8": ops.Real8, "ompi_mpi_real16": ops.Real16,
	"ompi_mpi_complex8": ops.Complex8, "ompi_mpi_complex16": ops.Complex16, "ompi_mpi_complex32": ops.Complex32,
	"ompi_mpi_2real": ops.TwoReal, "ompi_mpi_2dblprec": ops.TwoDoublePrecision, "ompi_mpi_2integer": ops.TwoInteger,
}

var ompiOps = map[string]ops.Op{
	"ompi_mpi_op_max": ops.Max, "ompi_mpi_op_min": ops.Min, "ompi_mpi_op_sum": ops.Sum, "ompi_mpi_op_prod": ops.Prod,
	"ompi_mpi_op_land": ops.Land, "ompi_mpi_op_band": ops.Band, "ompi_mpi_op_lor": ops.Lor, "ompi_mpi_op_bor": ops.Bor,
	"ompi_mpi_op_lxor": ops.Lxor, "ompi_mpi_op_bxor": ops.Bxor, "ompi_mpi_op_maxloc": ops.Maxloc, "ompi_mpi_op_minloc": ops.Minloc,
}

// MPICH's handles are integers fixed by its ABI (mpi.h); gocoll's own
// mpi.h uses the same values (package mpichabi). Only the datatypes MPICH
// 4.0 defines are used: asking an MPICH about a builtin handle it does not
// know fails an assertion and aborts, so MPI_INTEGER16, MPI_REAL2,
// MPI_COMPLEX4 and MPIX_BFLOAT16 (later MPICH versions) fall back to the
// host.
var mpichTypes = func() map[uint32]ops.Type {
	m := map[uint32]ops.Type{}
	for h, t := range mpichabi.Types {
		if !mpichabi.NotInMPICH40[h] {
			m[h] = t
		}
	}
	return m
}()

var mpichOps = mpichabi.Ops

// hostHandles are the host's handles registered with the C half.
type hostHandles struct {
	types []typeHandle
	ops   []opHandle
}

// A host handle as a plain integer (C's gc_handle), which tests can
// make up.
type typeHandle struct {
	h uint64
	t ops.Type
}

type opHandle struct {
	h uint64
	o ops.Op
}

// registerHandles tells the C half which handles are gocoll's datatypes
// and ops, and which (op, datatype) pairs gocoll reduces. A datatype is
// registered only if the host agrees with gocoll on its layout (extent,
// lower bound 0), so that a platform difference falls back instead of
// corrupting data. It returns the handles registered, in a fixed order
// (by ops.Type and ops.Op, then handle), the same on every rank.
func registerHandles(extent func(C.gc_handle) (lb, ext int64, ok bool)) hostHandles {
	var hh hostHandles
	reg := func(h C.gc_handle, t ops.Type) {
		if h == 0 {
			return
		}
		if lb, ext, ok := extent(h); !ok || lb != 0 || ext != int64(t.Size()) {
			return
		}
		C.gc_register_type(h, C.int(t), C.int(t.Size()))
		hh.types = append(hh.types, typeHandle{uint64(h), t})
	}
	regOp := func(h C.gc_handle, o ops.Op) {
		if h == 0 {
			return
		}
		C.gc_register_op(h, C.int(o))
		hh.ops = append(hh.ops, opHandle{uint64(h), o})
		if o == ops.Bor {
			C.gc_set_agree_op(h)
		}
	}
	if C.gc_flavor == C.GC_OMPI {
		for name, t := range ompiTypes {
			reg(symHandle(name), t)
		}
		for name, o := range ompiOps {
			regOp(symHandle(name), o)
		}
	} else {
		for h, t := range mpichTypes {
			reg(C.gc_handle(h), t)
		}
		for h, o := range mpichOps {
			regOp(C.gc_handle(h), o)
		}
	}
	slices.SortFunc(hh.types, func(a, b typeHandle) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.h, b.h)) })
	slices.SortFunc(hh.ops, func(a, b opHandle) int { return cmp.Or(cmp.Compare(a.o, b.o), cmp.Compare(a.h, b.h)) })
	for _, o := range ops.Ops() {
		for _, t := range ops.Types() {
			if _, err := ops.Lookup(o, t); err == nil {
				C.gc_allow(C.int(o), C.int(t))
			}
		}
	}
	return hh
}

func symHandle(name string) C.gc_handle {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.gc_sym_handle(cs)
}
