package pause

import (
	"testing"
	"time"
)

// For sleeps at least as long as asked (how much longer is the machine's
// to say: a benchmark, not a test, measures it).
func TestForSleepsAtLeastD(t *testing.T) {
	for _, d := range []time.Duration{0, 20 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
		t0 := time.Now()
		For(d)
		if got := time.Since(t0); got < d {
			t.Errorf("For(%v) returned after %v", d, got)
		}
	}
}

// BenchmarkPause20us against time.Sleep: `go test -bench . ./internal/pause`.
func BenchmarkPause20us(b *testing.B) {
	for b.Loop() {
		For(20 * time.Microsecond)
	}
}

func BenchmarkTimeSleep20us(b *testing.B) {
	for b.Loop() {
		time.Sleep(20 * time.Microsecond)
	}
}
