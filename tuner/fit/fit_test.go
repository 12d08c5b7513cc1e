package fit

import (
	"math"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
)

// synthetic returns exchanges of 4 B to 4 MiB taking alpha + beta n, each
// time multiplied by 1 + noise[i%len(noise)].
func synthetic(alpha, beta float64, noise ...float64) []Point {
	var pts []Point
	for i, n := 0, int64(4); n <= 4<<20; i, n = i+1, n*4 {
		t := alpha + beta*float64(n)
		if len(noise) > 0 {
			t *= 1 + noise[i%len(noise)]
		}
		pts = append(pts, Point{n, t})
	}
	return pts
}

func near(got, want, tol float64) bool { return math.Abs(got/want-1) <= tol }

// The fit recovers a known machine: exactly from exact times (a network
// of 50 µs and 1 Gbit/s; shared memory of 2 µs and 0.13 ns/B; a fast
// network), within 5% from times off by up to ±3%.
func TestLineRecoversAlphaBeta(t *testing.T) {
	for _, m := range []struct{ alpha, beta float64 }{{50e-6, 8e-9}, {2e-6, 0.13e-9}, {1e-6, 1.0 / 50e9}} {
		a, b, err := Line(synthetic(m.alpha, m.beta))
		if err != nil || !near(a, m.alpha, 1e-9) || !near(b, m.beta, 1e-9) {
			t.Errorf("exact %v: alpha %g beta %g (%v)", m, a, b, err)
		}
		a, b, err = Line(synthetic(m.alpha, m.beta, 0.03, -0.02, 0.01, -0.03, 0.02))
		if err != nil || !near(a, m.alpha, 0.05) || !near(b, m.beta, 0.05) {
			t.Errorf("noisy %v: alpha %g beta %g (%v)", m, a, b, err)
		}
	}
}

// Noise that would make the intercept or the slope negative leaves it at
// zero, the other fitted alone; one size is not a line.
func TestLineEdges(t *testing.T) {
	// Pure bandwidth, the small sizes a little fast: alpha 0, beta kept.
	pts := synthetic(0, 1e-9)
	pts[0].Seconds *= 0.9
	if a, b, err := Line(pts); err != nil || a != 0 || !near(b, 1e-9, 0.02) {
		t.Errorf("no latency: alpha %g beta %g (%v)", a, b, err)
	}
	// Flat times, the largest a little fast: beta 0, alpha their level.
	flat := []Point{{4, 10e-6}, {1 << 20, 9.9e-6}}
	if a, b, err := Line(flat); err != nil || b != 0 || !near(a, 10e-6, 0.01) {
		t.Errorf("no bandwidth term: alpha %g beta %g (%v)", a, b, err)
	}
	// A burst at line rate: 1 KiB to 64 KiB faster than the rate allows;
	// the fit keeps to the small and the large exchanges.
	pts = synthetic(40e-6, 80e-9)
	for i := range pts {
		if pts[i].Bytes >= 1024 && pts[i].Bytes <= 64<<10 {
			pts[i].Seconds = 40e-6 + 4e-9*float64(pts[i].Bytes)
		}
	}
	if a, b, err := Line(pts); err != nil || !near(a, 40e-6, 1e-9) || !near(b, 80e-9, 1e-9) {
		t.Errorf("burst: alpha %g beta %g (%v), want 40 µs, 80 ns/B", a, b, err)
	}
	if _, _, err := Line([]Point{{64, 1e-6}, {64, 2e-6}}); err == nil {
		t.Error("one size: no error")
	}
	if _, _, err := Line([]Point{{64, 1e-6}, {128, 0}}); err == nil {
		t.Error("a zero time: no error")
	}
}

// The pair within a node is two ranks of one node, the pair across
// nodes two ranks of different nodes, whatever the placement; where
// there is no such pair, none.
func TestPairsOf(t *testing.T) {
	for _, tc := range []struct {
		name               string
		nodes              []int
		intra, inter       [2]int
		hasIntra, hasInter bool
	}{
		{"4x2 by node", []int{0, 0, 1, 1, 2, 2, 3, 3}, [2]int{0, 1}, [2]int{0, 2}, true, true},
		{"2x2 round-robin", []int{0, 1, 0, 1}, [2]int{0, 2}, [2]int{0, 1}, true, true},
		{"rank 0 alone", []int{0, 1, 1, 2}, [2]int{1, 2}, [2]int{0, 1}, true, true},
		{"one node", []int{0, 0, 0, 0}, [2]int{0, 1}, [2]int{}, true, false},
		{"one rank per node", []int{0, 1, 2}, [2]int{}, [2]int{0, 1}, false, true},
		{"one rank", []int{0}, [2]int{}, [2]int{}, false, false},
	} {
		m := algorithms.NodeMapOf(tc.nodes)
		ps := PairsOf(m)
		if ps.HasIntra != tc.hasIntra || ps.HasInter != tc.hasInter || ps.Intra != tc.intra || ps.Inter != tc.inter {
			t.Errorf("%s: %+v, want intra %v (%v), inter %v (%v)", tc.name, ps, tc.intra, tc.hasIntra, tc.inter, tc.hasInter)
		}
		if ps.HasIntra && m.Node(ps.Intra[0]) != m.Node(ps.Intra[1]) {
			t.Errorf("%s: intra pair %v on nodes %d and %d", tc.name, ps.Intra, m.Node(ps.Intra[0]), m.Node(ps.Intra[1]))
		}
		if ps.HasInter && m.Node(ps.Inter[0]) == m.Node(ps.Inter[1]) {
			t.Errorf("%s: inter pair %v on one node", tc.name, ps.Inter)
		}
	}
}
