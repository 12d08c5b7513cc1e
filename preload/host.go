package main

/*
#include "preload.h"
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/gocoll/gocoll/ops"
)

// Where the host MPI is wrong. Both host MPIs of this machine return
// wrong reductions on some predefined (op, datatype) pairs
// (docs/preload.md, "Correct where the host is not"); a call the tuner gives the host
// would bring them back. So at the start each rank runs the host's
// MPI_Reduce_local on every pair gocoll reduces, on values chosen to find
// the known kinds of bug (unsigned and signed extremes, wrap-around,
// lengths that reach the SIMD loops and their tails), and compares with
// gocoll's own kernels (package ops): a pair on which they differ is
// excluded from the host (excludeHost), and the C half routes its calls
// to gocoll's best algorithm instead. The ranks of a communicator agree
// on the exclusions at its first call (shim.c, comm_state), so a rank
// whose host differs cannot take another route. tests/preload's exact
// checker proves that no call of a pair the host's collectives get wrong
// reaches them.

// exclusion is a set of reasons (preload.h's GC_X_* bits) why the host
// must not run a pair.
type exclusion uint8

const (
	hostWrong   exclusion = C.GC_X_WRONG
	testExclude exclusion = C.GC_X_TEST
	// reproducible: GOCOLL_REPRODUCIBLE=1 asks for the canonical order,
	// and the host's is unknown.
	reproducible exclusion = C.GC_X_REPRODUCIBLE
)

// excludeHost keeps every call of op on t from the host's collective,
// for reason (GOCOLL_<COLL>_ALGORITHM=native still sends it there).
// Called at the start, before gocoll runs calls.
func excludeHost(op ops.Op, t ops.Type, reason exclusion) {
	C.gc_exclude_host(C.int(op), C.int(t), C.int(reason))
}

// why says, for GOCOLL_DEBUG=info, why a call of op on t does not go to
// the host: "host MPI wrong for MPI_MAX on MPI_UNSIGNED_CHAR".
func (x exclusion) why(op ops.Op, t ops.Type) string {
	var s []string
	if x&hostWrong != 0 {
		s = append(s, fmt.Sprintf("host MPI wrong for %v on %v", op, t))
	}
	if x&testExclude != 0 {
		s = append(s, fmt.Sprintf("GOCOLL_PRELOAD_EXCLUDE names %v on %v on a rank", op, t))
	}
	if x&reproducible != 0 {
		s = append(s, fmt.Sprintf("GOCOLL_REPRODUCIBLE=1 and %v on %v depends on the order, which the host does not promise", op, t))
	}
	if rest := x &^ (hostWrong | testExclude | reproducible); rest != 0 {
		s = append(s, fmt.Sprintf("host excluded (reasons %#x) for %v on %v", uint8(rest), op, t))
	}
	return strings.Join(s, "; ")
}

// wrongPair is a pair on which the host's reduction differs from
// gocoll's, with the first element that shows it.
type wrongPair struct {
	op   ops.Op
	t    ops.Type
	what string
}

// probeLengths reach the scalar code (1, 3) and the SIMD loops of 16, 32
// and 64 bytes with their tails (257 bytes are four 64-byte vectors and
// one more).
var probeLengths = []int{1, 3, 33, 257}

// knownWrong are the pairs on which a host, by flavor and version, is
// wrong where the probe cannot see it: MPICH 4.0 aborts the process at
// every reduction on MPIX_C_FLOAT16 (the probe would too), Open MPI 4.1's
// collectives multiply complex numbers wrongly from 3 ranks on although
// its MPI_Reduce_local is right. They are excluded without probing.
// TestHostTable (tests/preload) proves each entry against the real host.
var knownWrong = []struct {
	flavor, version string // version: the start of the number after "Version:" or "Open MPI v"
	op              ops.Op // OpNull: every op
	types           func(ops.Type) bool
	what            string
}{
	{"mpich", "4.0.", ops.OpNull, func(t ops.Type) bool { return t == ops.Float16 },
		"aborts: MPI_Reduce_local and the collectives fail an assertion in typerep_yaksa_pack.c"},
	{"openmpi", "4.1.", ops.Prod, func(t ops.Type) bool { return t.Class() == ops.ClassComplex },
		"its collectives are wrong from 3 ranks on (its MPI_Reduce_local is right)"},
}

// knownWrongOn returns what knownWrong says of op on t on the host
// flavor whose MPI_Get_library_version is version, or "".
func knownWrongOn(flavor, version string, op ops.Op, t ops.Type) string {
	v := version
	for _, mark := range []string{"Version:", "Open MPI v"} {
		if _, rest, ok := strings.Cut(version, mark); ok {
			v = strings.TrimSpace(rest)
		}
	}
	for _, k := range knownWrong {
		if k.flavor == flavor && (k.op == ops.OpNull || k.op == op) && k.types(t) && strings.HasPrefix(v, k.version) {
			return k.what
		}
	}
	return ""
}

// probeHost compares the host's MPI_Reduce_local with gocoll's kernel on
// every registered (op, datatype handle) pair gocoll reduces; reduce runs
// the host's, returning its error code. The values depend only on the
// pair, so every rank probes the same. Pairs knownWrongOn the host are
// not tried, and wrong.
func probeHost(hh hostHandles, flavor, version string, reduce func(in, inout []byte, n int, dt, op uint64) int) []wrongPair {
	var wrong []wrongPair
	seen := map[[2]uint8]bool{} // a datatype may have several handles
	for _, th := range hh.types {
		for _, oh := range hh.ops {
			key := [2]uint8{uint8(oh.o), uint8(th.t)}
			k, err := ops.Lookup(oh.o, th.t)
			if err != nil || seen[key] {
				continue
			}
			what := knownWrongOn(flavor, version, oh.o, th.t)
			if what == "" {
				what = probePair(k, th, oh, reduce)
			}
			if what != "" {
				seen[key] = true
				wrong = append(wrong, wrongPair{oh.o, th.t, what})
			}
		}
	}
	return wrong
}

// probePair returns "" if the host reduces op on the datatype as gocoll
// does at every probe length, or what differs.
func probePair(k ops.Kernel, th typeHandle, oh opHandle, reduce func(in, inout []byte, n int, dt, op uint64) int) string {
	size, fields := th.t.Size(), layout(th.t)
	r := splitmix(uint64(oh.o)<<8 | uint64(th.t))
	for _, n := range probeLengths {
		in, inout := make([]byte, n*size), make([]byte, n*size)
		fill(in, th.t, oh.o, fields, &r)
		fill(inout, th.t, oh.o, fields, &r)
		want := make([]byte, len(in))
		k(want, in, inout) // MPI_Reduce_local: inout = in op inout
		got := bytes.Clone(inout)
		if rc := reduce(in, got, n, th.h, oh.h); rc != 0 {
			return fmt.Sprintf("MPI_Reduce_local fails (error %d) at %d elements", rc, n)
		}
		for i := range n {
			for _, f := range fields {
				at := i*size + f.off
				if !bytes.Equal(got[at:at+f.size], want[at:at+f.size]) {
					e := func(b []byte) string { return fmt.Sprintf("%x", b[i*size:(i+1)*size]) }
					return fmt.Sprintf("element %d of %d: %s op %s gives %s, want %s", i, n, e(in), e(inout), e(got), e(want))
				}
			}
		}
	}
	return ""
}

// field is a part of an element that a reduction defines: padding (and
// the 6 unused bytes of an x87 long double) lie outside every field.
type field struct {
	off, size int
	kind      fieldKind
}

type fieldKind uint8

const (
	fInt   fieldKind = iota // a two's-complement integer
	fIndex                  // a MAXLOC/MINLOC index: small, so that ties are common
	fBool                   // 0 or 1
	fF16
	fBF16
	fF32
	fF64
	fF80
	fF128
)

// layout returns the fields of one element of t (Linux x86-64, as package
// ops lays them out).
func layout(t ops.Type) []field {
	f := func(off int, k fieldKind) field {
		size := map[fieldKind]int{fF16: 2, fBF16: 2, fF32: 4, fF64: 8, fF80: 10, fF128: 16}[k]
		return field{off, size, k}
	}
	switch t {
	case ops.FloatInt:
		return []field{f(0, fF32), {4, 4, fIndex}}
	case ops.DoubleInt:
		return []field{f(0, fF64), {8, 4, fIndex}}
	case ops.LongInt:
		return []field{{0, 8, fInt}, {8, 4, fIndex}}
	case ops.TwoInt, ops.TwoInteger:
		return []field{{0, 4, fInt}, {4, 4, fIndex}}
	case ops.ShortInt:
		return []field{{0, 2, fInt}, {4, 4, fIndex}}
	case ops.LongDoubleInt:
		return []field{f(0, fF80), {16, 4, fIndex}}
	case ops.TwoReal:
		return []field{f(0, fF32), f(4, fF32)}
	case ops.TwoDoublePrecision:
		return []field{f(0, fF64), f(8, fF64)}
	}
	var k fieldKind
	switch t {
	case ops.Float16, ops.Real2, ops.Complex4:
		k = fF16
	case ops.BFloat16:
		k = fBF16
	case ops.LongDouble, ops.CLongDoubleComplex, ops.CXXLongDoubleComplex:
		k = fF80
	case ops.Real16, ops.Complex32:
		k = fF128
	}
	switch t.Class() {
	case ops.ClassComplex:
		half := t.Size() / 2
		if k == fInt {
			k = map[int]fieldKind{4: fF32, 8: fF64}[half]
		}
		return []field{f(0, k), f(half, k)}
	case ops.ClassFloatingPoint:
		if k == fInt {
			k = map[int]fieldKind{4: fF32, 8: fF64}[t.Size()]
		}
		return []field{f(0, k)}
	case ops.ClassLogical:
		return []field{{0, t.Size(), fBool}}
	}
	return []field{{0, t.Size(), fInt}}
}

// fill writes random elements of t into b for op, padding zero. Integers
// are mostly extremes (0, 1, 100, 200, the signed and unsigned maxima and
// minima and their neighbours), so that every pair of them meets at the
// longer lengths; logical ops get many zeros. Floats are small integers
// times powers of two, so that sums and products of two are exact in
// every format and every correct implementation agrees bit for bit; no
// NaN or -0, on which implementations may differ.
func fill(b []byte, t ops.Type, op ops.Op, fields []field, r *splitmix) {
	size := t.Size()
	logical := op == ops.Land || op == ops.Lor || op == ops.Lxor
	order := op == ops.Max || op == ops.Min
	for at := 0; at < len(b); at += size {
		for _, f := range fields {
			p, x := b[at+f.off:], r.next()
			switch f.kind {
			case fInt:
				lo, hi := extreme(x, min(f.size, 8)), uint64(0)
				if f.size > 8 {
					hi = extreme(r.next(), 8)
				}
				if logical && x>>63 == 0 {
					lo, hi = 0, 0
				}
				putInt(p[:f.size], lo, hi)
			case fIndex:
				putInt(p[:f.size], uint64(int64(x%5)-2), 0)
			case fBool:
				putInt(p[:f.size], x%2, 0)
			default:
				v := float64(int64(x%31) - 15)
				if t.Class() == ops.ClassPair {
					v = float64(int64(x%7) - 3) // ties
				} else if order {
					v = math.Ldexp(v, int(x>>32%21)-10)
				}
				putFloat(p, f.kind, v)
			}
		}
	}
}

// extreme returns an integer of size bytes (1..8) from the random x:
// mostly one of the values at which signed and unsigned arithmetic and
// comparisons part.
func extreme(x uint64, size int) uint64 {
	bits := uint(8 * size)
	ones := uint64(math.MaxUint64) >> (64 - bits)
	top := uint64(1) << (bits - 1)
	var v uint64
	switch x >> 40 % 14 {
	case 0:
		v = 0
	case 1:
		v = 1
	case 2:
		v = 2
	case 3:
		v = ones // -1, the unsigned maximum
	case 4:
		v = ones - 1
	case 5:
		v = top - 1 // the signed maximum
	case 6:
		v = top // the signed minimum
	case 7:
		v = top + 1
	case 8:
		v = 100
	case 9:
		v = 200
	case 10:
		v = top >> 1
	default:
		v = x
	}
	return v & ones
}

// putInt writes a little-endian integer of len(p) bytes: lo, then hi for
// 16-byte integers.
func putInt(p []byte, lo, hi uint64) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], lo)
	binary.LittleEndian.PutUint64(b[8:], hi)
	copy(p, b[:len(p)])
}

// putFloat writes v, an integer of at most 5 bits times a power of two in
// [-10, 10], in format k: such values are exact in every format.
func putFloat(p []byte, k fieldKind, v float64) {
	bits := math.Float64bits(v)
	sign, exp, frac := bits>>63, int64(bits>>52&0x7ff)-1023, bits&(1<<52-1)
	if v == 0 {
		sign, exp, frac = 0, 0, 0
	}
	le := binary.LittleEndian
	switch k {
	case fF16:
		if v != 0 {
			le.PutUint16(p, uint16(sign<<15|uint64(exp+15)<<10|frac>>42))
		}
	case fBF16:
		if v != 0 {
			le.PutUint16(p, uint16(sign<<15|uint64(exp+127)<<7|frac>>45))
		}
	case fF32:
		le.PutUint32(p, math.Float32bits(float32(v)))
	case fF64:
		le.PutUint64(p, bits)
	case fF80:
		if v != 0 {
			le.PutUint64(p, 1<<63|frac<<11)
			le.PutUint16(p[8:], uint16(sign<<15|uint64(exp+16383)))
		}
	case fF128:
		if v != 0 {
			le.PutUint64(p, frac<<60)
			le.PutUint64(p[8:], sign<<63|uint64(exp+16383)<<48|frac>>4)
		}
	}
}

// hostReduce is the host's MPI_Reduce_local, for probeHost.
func hostReduce(in, inout []byte, n int, dt, op uint64) int {
	return int(C.gc_reduce_local(unsafe.Pointer(&in[0]), unsafe.Pointer(&inout[0]), C.int64_t(n), C.gc_handle(dt), C.gc_handle(op)))
}

// parseExclude reads GOCOLL_PRELOAD_EXCLUDE: op:datatype pairs, by their
// MPI names, separated by commas.
func parseExclude(v string) ([][2]uint8, error) {
	var pairs [][2]uint8
	for _, item := range strings.Split(v, ",") {
		on, tn, _ := strings.Cut(strings.TrimSpace(item), ":")
		o, t := byName(ops.Ops(), on), byName(ops.Types(), tn)
		if o == 0 || t == 0 {
			return nil, fmt.Errorf("GOCOLL_PRELOAD_EXCLUDE=%s: %q: want op:datatype, such as MPI_SUM:MPI_INT", v, item)
		}
		pairs = append(pairs, [2]uint8{uint8(o), uint8(t)})
	}
	return pairs, nil
}

func byName[T interface {
	~uint8
	String() string
}](all []T, name string) T {
	for _, x := range all {
		if x.String() == name {
			return x
		}
	}
	return 0
}

// splitmix is a small fast random source (SplitMix64): the probe's values
// need to be spread, not unpredictable, and the same on every rank.
type splitmix uint64

func (s *splitmix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
