package ops

import (
	"reflect"
	"testing"

	"github.com/gocoll/gocoll/ops/internal/cfloat"
)

// The kernels start at the best level; CapISA caps them, a level the CPU
// lacks leaving the best, and rejects an unknown one without a change.
func TestCapISA(t *testing.T) {
	levels := supportedISAs()
	best := levels[len(levels)-1]
	if ISA() != best.String() {
		t.Errorf("at start-up ISA() = %q, want %v", ISA(), best)
	}
	t.Cleanup(func() { CapISA("") })
	kernel := func(tbl *kernelTable) uintptr { return reflect.ValueOf(tbl.table[Sum][kF32]).Pointer() }
	for _, c := range []struct {
		level string
		want  isa
	}{{"go", isaGo}, {"avx2", min(best, isaAVX2)}, {"avx512", min(best, isaAVX512)}, {"", best}, {"go", isaGo}, {"best", best}} {
		if err := CapISA(c.level); err != nil {
			t.Fatalf("CapISA(%q): %v", c.level, err)
		}
		k, err := Lookup(Sum, Float)
		if ISA() != c.want.String() || err != nil || reflect.ValueOf(k).Pointer() != kernel(newKernelTable(c.want)) {
			t.Errorf("after CapISA(%q): ISA() = %q, Lookup(MPI_SUM, MPI_FLOAT) not %v's kernel", c.level, ISA(), c.want)
		}
	}
	CapISA("go")
	if err := CapISA("sse9"); err == nil || ISA() != "go" {
		t.Errorf("CapISA(sse9) = %v, ISA() = %q: want an error and no change", err, ISA())
	}
	t.Logf("levels %v", levels)
}

// TestTablesComplete checks that every level has a kernel for every allowed
// pair (the C ones aside, which need cgo).
func TestTablesComplete(t *testing.T) {
	for _, l := range supportedISAs() {
		tbl := newKernelTable(l)
		for _, typ := range Types() {
			for _, op := range Ops() {
				if Allowed(op, typ) && tbl.table[op][typ.kind()] == nil && !(isCKind(typ.kind()) && !cfloat.Available) {
					t.Errorf("%v: no kernel for %v on %v", l, op, typ)
				}
			}
		}
	}
}
