package main

import (
	"os"
	"testing"

	"github.com/gocoll/gocoll/internal/provenance"
)

// results/half-precision-error.txt is this command's output (below its
// provenance header), and no sum rounded once is off by more than its
// bound.
func TestTable(t *testing.T) {
	text, bad := table(20000)
	if bad > 0 {
		t.Errorf("%d sums rounded once beyond their bound", bad)
	}
	committed, err := os.ReadFile("../../results/half-precision-error.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, body, ok := provenance.Parse(string(committed)); !ok || body != text {
		t.Errorf("results/half-precision-error.txt has no header, or differs from what gocoll-halferr writes: go run ./cmd/gocoll-halferr > results/half-precision-error.txt")
	}
}

// The bound admits half an ulp and float32's error, and nothing more.
func TestBounded(t *testing.T) {
	f := formats[0] // float16: ulp(1) = 2^-10
	if !f.bounded(0.5*0x1p-10, 1, 1, 2) {
		t.Error("half an ulp at 1, p = 2: out of bound")
	}
	if f.bounded(0x1p-10, 1, 1, 2) {
		t.Error("an ulp at 1, p = 2: within bound")
	}
	// At p = 64, sum |x| = 64: float32's six levels add 6 * 2^-24 * 64.
	if !f.bounded(0.5*0x1p-10+6*0x1p-24*64, 1, 64, 64) || f.bounded(0.5*0x1p-10+7*0x1p-24*64, 1, 64, 64) {
		t.Error("the float32 term of the bound is not gamma(6) * sum |x|")
	}
}
