// Command gocoll-halferr tabulates the error of float16 and bfloat16 sums
// over p ranks against the exact sum, two ways: rounded to 16 bits after
// every add, in rank order (what a ring's hops do), and accumulated in
// float32 along the canonical association and rounded once
// (ops.CanonicalReduce: reproducible mode, and the shm engine by
// default). results/half-precision-error.txt is its output:
//
//	go run ./cmd/gocoll-halferr > results/half-precision-error.txt
//
// headed by the command, commit and machine (internal/provenance), and
// its test fails while the table below that header differs from what it
// writes. It exits with status 1 if a sum rounded once is off by more
// than its bound, 0.5 ulp(|exact| + d) + d, d = gamma(h) * sum |x|,
// h = ceil(log2 p): one rounding to 16 bits after float32 pairwise
// summation's error.
package main

import (
	"flag"
	"fmt"
	"github.com/gocoll/gocoll/internal/cmdhelp"
	"github.com/gocoll/gocoll/internal/provenance"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/gocoll/gocoll/ops"
)

func main() {
	n := flag.Int("n", 20000, "sums per row")
	cmdhelp.Help{Name: "gocoll-halferr", Summary: "tabulate the error of float16 and bfloat16 sums over p ranks", Usage: []string{"gocoll-halferr [-n sums]"}, About: `Compares, against the exact sum, float16 and bfloat16 sums rounded to 16
bits after every add in rank order (a ring's hops) and accumulated in
float32 along the canonical association and rounded once (reproducible
mode). Exits 1 if a sum rounded once is off by more than its bound.`}.Set(flag.CommandLine, os.Args[1:])
	flag.Parse()
	text, bad := table(*n)
	fmt.Print(provenance.New("").Comment(), "\n", text)
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "gocoll-halferr: %d sums rounded once beyond their bound\n", bad)
		os.Exit(1)
	}
}

// format is a 16-bit float format.
type format struct {
	t      ops.Type
	name   string
	from   func(float32) uint16
	to     func(uint16) float32
	frac   int // fraction bits
	minExp int // exponent of the smallest normal
}

var formats = []format{
	{ops.Float16, "float16", ops.Float16FromFloat32, ops.Float16ToFloat32, 10, -14},
	{ops.BFloat16, "bfloat16", ops.BFloat16FromFloat32, ops.BFloat16ToFloat32, 7, -126},
}

var dists = []struct {
	name string
	draw func(*rand.Rand) float64
}{
	{"uniform[0,1)", func(r *rand.Rand) float64 { return r.Float64() }},
	{"normal(0,1)", func(r *rand.Rand) float64 { return r.NormFloat64() }},
	{"+-2^U(-8,8)", func(r *rand.Rand) float64 {
		return float64(1-2*r.IntN(2)) * math.Exp2(16*r.Float64()-8)
	}},
}

var ps = []int{2, 3, 4, 5, 8, 16, 32, 64}

// ulp is the spacing of f at magnitude x.
func (f format) ulp(x float64) float64 {
	e := f.minExp
	if x != 0 {
		_, exp := math.Frexp(math.Abs(x)) // |x| = m * 2^exp, m in [0.5, 1)
		e = max(exp-1, f.minExp)
	}
	return math.Ldexp(1, e-f.frac)
}

// table returns the table for n sums per row, and how many sums rounded
// once broke their bound.
func table(n int) (string, int) {
	var b strings.Builder
	fmt.Fprintf(&b, `# float16 and bfloat16 MPI_SUM over p ranks: error against the exact sum
# (in float64, exact for these inputs), in units in the last place (ulp)
# of the 16-bit format at sum |x| (at the sum itself for non-negative
# inputs; a sum that cancels is measured against the size of its terms);
# %d sums per row, inputs drawn from the distribution, rounded to the format.
#   hop:  rounded to 16 bits after every add, in rank order (a ring's hops)
#   once: float32 along the canonical association T(0, p), rounded once
#         (ops.CanonicalReduce: reproducible mode, the shm engine by default)
# mean and max of |result - exact| / ulp(sum |x|); bad: sums rounded once off by more
# than 0.5 ulp(|exact| + d) + d, d = gamma(ceil(log2 p)) sum |x|, float32's.
# Written by go run ./cmd/gocoll-halferr.

%-9s %-13s %3s %9s %9s %9s %9s %4s
`, n, "format", "inputs", "p", "hop mean", "hop max", "once mean", "once max", "bad")
	bad := 0
	for _, f := range formats {
		hop, _ := ops.Lookup(ops.Sum, f.t)
		for di, d := range dists {
			for _, p := range ps {
				rng := rand.New(rand.NewPCG(uint64(di), uint64(p)))
				parts := make([][]byte, p)
				for q := range parts {
					parts[q] = make([]byte, 2*n)
					for i := range n {
						h := f.from(float32(d.draw(rng)))
						parts[q][2*i], parts[q][2*i+1] = byte(h), byte(h>>8)
					}
				}
				ring := append([]byte(nil), parts[0]...)
				for q := 1; q < p; q++ {
					hop(ring, ring, parts[q])
				}
				once := make([]byte, 2*n)
				if err := ops.CanonicalReduce(ops.Sum, f.t, once, parts); err != nil {
					panic(err)
				}
				var hopSum, hopMax, onceSum, onceMax float64
				rowBad := 0
				for i := range n {
					exact, abs := 0.0, 0.0
					for q := range p {
						x := float64(f.to(half(parts[q], i)))
						exact += x
						abs += math.Abs(x)
					}
					u := f.ulp(abs)
					eh := math.Abs(float64(f.to(half(ring, i)))-exact) / u
					eo := math.Abs(float64(f.to(half(once, i))) - exact)
					hopSum, hopMax = hopSum+eh, max(hopMax, eh)
					onceSum, onceMax = onceSum+eo/u, max(onceMax, eo/u)
					if !f.bounded(eo, exact, abs, p) {
						rowBad++
					}
				}
				bad += rowBad
				fmt.Fprintf(&b, "%-9s %-13s %3d %9.3f %9.2f %9.3f %9.2f %4d\n", f.name, d.name, p,
					hopSum/float64(n), hopMax, onceSum/float64(n), onceMax, rowBad)
			}
		}
	}
	return b.String(), bad
}

// bounded reports whether err, the error of a sum of p terms rounded
// once, is within 0.5 ulp(|exact| + d) + d, d = gamma(h) * abs (abs: the
// sum of the terms' magnitudes): float32 pairwise summation's error over
// h = ceil(log2 p) levels, then one rounding to the format.
func (f format) bounded(err, exact, abs float64, p int) bool {
	h := math.Ceil(math.Log2(float64(p)))
	d := h * 0x1p-24 / (1 - h*0x1p-24) * abs
	return err <= 0.5*f.ulp(math.Abs(exact)+d)+d
}

func half(b []byte, i int) uint16 { return uint16(b[2*i]) | uint16(b[2*i+1])<<8 }
