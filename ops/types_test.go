package ops

import (
	"strings"
	"testing"
	"unsafe"
)

func TestTypes(t *testing.T) {
	ts := Types()
	if len(ts) != len(testLayouts) {
		t.Errorf("Types() has %d types, the test knows %d", len(ts), len(testLayouts))
	}
	names := map[string]bool{}
	for _, typ := range ts {
		if !typ.Valid() {
			t.Errorf("%v is not valid", typ)
		}
		if want := testLayouts[typ].size; typ.Size() != want {
			t.Errorf("%v.Size() = %d, want %d", typ, typ.Size(), want)
		}
		name := typ.String()
		if !strings.HasPrefix(name, "MPI_") && !strings.HasPrefix(name, "MPIX_") || names[name] {
			t.Errorf("bad or repeated name %q", name)
		}
		names[name] = true
	}
	for _, c := range []struct {
		typ  Type
		name string
	}{{Double, "MPI_DOUBLE"}, {TwoInt, "MPI_2INT"}, {Float16, "MPIX_C_FLOAT16"},
		{BFloat16, "MPIX_BFLOAT16"}, {TypeNull, "MPI_DATATYPE_NULL"}} {
		if got := c.typ.String(); got != c.name {
			t.Errorf("String() = %q, want %q", got, c.name)
		}
	}
	if TypeNull.Valid() || numTypes.Valid() || TypeNull.Size() != 0 {
		t.Error("TypeNull or an out-of-range type is valid")
	}
	if len(Ops()) != 12 || Sum.String() != "MPI_SUM" || OpNull.Valid() {
		t.Error("Ops")
	}
}

// TestPairLayout checks that Go lays out the pair structs as the C ABI does.
func TestPairLayout(t *testing.T) {
	for _, c := range []struct {
		typ       Type
		size, idx uintptr
	}{
		{FloatInt, unsafe.Sizeof(pair[float32, int32]{}), unsafe.Offsetof(pair[float32, int32]{}.I)},
		{DoubleInt, unsafe.Sizeof(pair[float64, int32]{}), unsafe.Offsetof(pair[float64, int32]{}.I)},
		{LongInt, unsafe.Sizeof(pair[int64, int32]{}), unsafe.Offsetof(pair[int64, int32]{}.I)},
		{ShortInt, unsafe.Sizeof(pair[int16, int32]{}), unsafe.Offsetof(pair[int16, int32]{}.I)},
		{TwoInt, unsafe.Sizeof(pair[int32, int32]{}), unsafe.Offsetof(pair[int32, int32]{}.I)},
		{TwoReal, unsafe.Sizeof(pair[float32, float32]{}), unsafe.Offsetof(pair[float32, float32]{}.I)},
		{TwoDoublePrecision, unsafe.Sizeof(pair[float64, float64]{}), unsafe.Offsetof(pair[float64, float64]{}.I)},
	} {
		l := testLayouts[c.typ]
		if int(c.size) != l.size || int(c.idx) != l.idxOff {
			t.Errorf("%v: Go pair is %d bytes, index at %d; C: %d, %d", c.typ, c.size, c.idx, l.size, l.idxOff)
		}
	}
}
