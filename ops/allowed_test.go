package ops

import (
	"errors"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/ops/internal/cfloat"
)

// The standard's groups of datatypes (MPI-4.0 section 6.9.2; the pairs from
// 6.9.4), by name, plus the extensions gocoll puts in "floating point".
var standardGroups = map[string]string{
	"C integer": `MPI_INT MPI_LONG MPI_SHORT MPI_UNSIGNED_SHORT MPI_UNSIGNED
		MPI_UNSIGNED_LONG MPI_LONG_LONG MPI_UNSIGNED_LONG_LONG MPI_SIGNED_CHAR
		MPI_UNSIGNED_CHAR MPI_INT8_T MPI_INT16_T MPI_INT32_T MPI_INT64_T
		MPI_UINT8_T MPI_UINT16_T MPI_UINT32_T MPI_UINT64_T`,
	"Fortran integer": `MPI_INTEGER MPI_INTEGER1 MPI_INTEGER2 MPI_INTEGER4
		MPI_INTEGER8 MPI_INTEGER16`,
	"Floating point": `MPI_FLOAT MPI_DOUBLE MPI_REAL MPI_DOUBLE_PRECISION
		MPI_LONG_DOUBLE MPI_REAL2 MPI_REAL4 MPI_REAL8 MPI_REAL16
		MPIX_C_FLOAT16 MPIX_BFLOAT16`,
	"Logical": `MPI_LOGICAL MPI_C_BOOL MPI_CXX_BOOL`,
	"Complex": `MPI_COMPLEX MPI_C_FLOAT_COMPLEX MPI_C_DOUBLE_COMPLEX
		MPI_C_LONG_DOUBLE_COMPLEX MPI_CXX_FLOAT_COMPLEX MPI_CXX_DOUBLE_COMPLEX
		MPI_CXX_LONG_DOUBLE_COMPLEX MPI_DOUBLE_COMPLEX MPI_COMPLEX4
		MPI_COMPLEX8 MPI_COMPLEX16 MPI_COMPLEX32`,
	"Byte":                 `MPI_BYTE`,
	"Multi-language types": `MPI_AINT MPI_OFFSET MPI_COUNT`,
	"MINLOC/MAXLOC pairs": `MPI_FLOAT_INT MPI_DOUBLE_INT MPI_LONG_INT MPI_2INT
		MPI_SHORT_INT MPI_LONG_DOUBLE_INT MPI_2REAL MPI_2DOUBLE_PRECISION
		MPI_2INTEGER`,
	"none": `MPI_CHAR MPI_WCHAR MPI_PACKED MPI_CHARACTER`,
}

// The standard's table: op, allowed groups.
var standardTable = map[string]string{
	"MPI_MAX MPI_MIN":           "C integer, Fortran integer, Floating point, Multi-language types",
	"MPI_SUM MPI_PROD":          "C integer, Fortran integer, Floating point, Complex, Multi-language types",
	"MPI_LAND MPI_LOR MPI_LXOR": "C integer, Logical, Multi-language types",
	"MPI_BAND MPI_BOR MPI_BXOR": "C integer, Fortran integer, Byte, Multi-language types",
	"MPI_MAXLOC MPI_MINLOC":     "MINLOC/MAXLOC pairs",
}

func groupOf(t *testing.T, typ Type) string {
	var found []string
	for g, names := range standardGroups {
		for _, n := range strings.Fields(names) {
			if n == typ.String() {
				found = append(found, g)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%v is in groups %q", typ, found)
	}
	return found[0]
}

func standardAllows(t *testing.T, op Op, typ Type) bool {
	g := groupOf(t, typ)
	for ops, groups := range standardTable {
		for _, o := range strings.Fields(ops) {
			if o == op.String() {
				for _, a := range strings.Split(groups, ", ") {
					if a == g {
						return true
					}
				}
				return false
			}
		}
	}
	t.Fatalf("%v is not in the table", op)
	return false
}

func TestAllowedMatchesStandard(t *testing.T) {
	n := 0
	for _, typ := range Types() {
		for _, op := range Ops() {
			want := standardAllows(t, op, typ)
			if got := Allowed(op, typ); got != want {
				t.Errorf("Allowed(%v, %v) = %v, want %v", op, typ, got, want)
			}
			if want {
				n++
			}
		}
	}
	t.Logf("%d allowed pairs", n)
}

func TestClassMatchesGroup(t *testing.T) {
	want := map[string]Class{
		"C integer": ClassCInteger, "Fortran integer": ClassFortranInteger,
		"Floating point": ClassFloatingPoint, "Logical": ClassLogical,
		"Complex": ClassComplex, "Byte": ClassByte,
		"Multi-language types": ClassMultiLanguage, "MINLOC/MAXLOC pairs": ClassPair,
		"none": ClassNone,
	}
	for _, typ := range Types() {
		if got, w := typ.Class(), want[groupOf(t, typ)]; got != w {
			t.Errorf("%v.Class() = %v, want %v", typ, got, w)
		}
	}
}

func TestLookupForbidden(t *testing.T) {
	for _, typ := range Types() {
		for _, op := range Ops() {
			k, err := Lookup(op, typ)
			if Allowed(op, typ) {
				if err != nil && !(isCKind(typ.kind()) && !cfloat.Available) {
					t.Errorf("Lookup(%v, %v): %v", op, typ, err)
				}
				continue
			}
			var e *Error
			if k != nil || !errors.As(err, &e) {
				t.Fatalf("Lookup(%v, %v) = %v, %v; want nil, *Error", op, typ, k != nil, err)
			}
			if e.Op != op || e.Type != typ {
				t.Errorf("Lookup(%v, %v): error names %v, %v", op, typ, e.Op, e.Type)
			}
			if !strings.Contains(e.Msg, op.String()) || !strings.Contains(e.Msg, typ.String()) {
				t.Errorf("Lookup(%v, %v): message %q does not name both", op, typ, e.Msg)
			}
		}
	}
	_, err := Lookup(Band, Double)
	const want = "MPI_BAND is not defined on MPI_DOUBLE (bitwise ops need an integer or MPI_BYTE)"
	if err == nil || err.Error() != want {
		t.Errorf("Lookup(Band, Double) = %v, want %q", err, want)
	}
	for _, c := range []struct {
		op  Op
		typ Type
	}{{OpNull, Int}, {Sum, TypeNull}, {numOps, Int}, {Sum, numTypes}} {
		if _, err := Lookup(c.op, c.typ); err == nil {
			t.Errorf("Lookup(%v, %v) succeeded", c.op, c.typ)
		}
	}
}
