package ops

import (
	"os"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/ops/internal/cfloat"
)

func TestSelectISA(t *testing.T) {
	levels := supportedISAs()
	best := levels[len(levels)-1]
	// envvar reads the variable as ops does at initialisation.
	if ISA() != selectISA(strings.ToLower(strings.TrimSpace(os.Getenv(EnvISA)))).String() {
		t.Errorf("ISA() = %q", ISA())
	}
	for env, want := range map[string]isa{"": best, "bogus": best, "go": isaGo,
		"avx2": min(best, isaAVX2), "avx512": min(best, isaAVX512)} {
		if got := selectISA(env); got != want {
			t.Errorf("selectISA(%q) = %v, want %v", env, got, want)
		}
	}
	t.Logf("levels %v, in use %s", levels, ISA())
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
