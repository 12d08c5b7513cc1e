//go:build linux

package intranode

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/intranode/intranodetest"
	"github.com/gocoll/gocoll/ops"
)

// BenchmarkCollectives runs each collective on 2 goroutine ranks with
// several slot sizes: the numbers behind DefaultSlot.
func BenchmarkCollectives(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
		for _, slot := range []int{32 << 10, 128 << 10, 512 << 10} {
			for _, name := range []string{"allreduce", "allgather", "reduce_scatter"} {
				b.Run(fmt.Sprintf("%s/%dK/slot%dK", name, size>>10, slot>>10), func(b *testing.B) {
					benchOne(b, 2, slot, size, name)
				})
			}
		}
	}
}

// BenchmarkReductions runs allreduce and reduce_scatter of MPI_SUM on 4
// and 8 goroutine ranks (more than the cores here: the engine's crowded
// waits), on doubles and float16s: the cost of the canonical association
// and of float16's float32 accumulation.
func BenchmarkReductions(b *testing.B) {
	for _, typ := range []ops.Type{ops.Double, ops.Float16} {
		for _, p := range []int{4, 8} {
			for _, size := range []int{16 << 10, 128 << 10, 1 << 20} {
				for _, name := range []string{"allreduce", "reduce_scatter"} {
					b.Run(fmt.Sprintf("%v/p=%d/%s/%dK", typ, p, name, size>>10), func(b *testing.B) {
						benchType(b, p, DefaultSlot, size, name, typ)
					})
				}
			}
		}
	}
}

func benchOne(b *testing.B, p, slot, size int, name string) {
	benchType(b, p, slot, size, name, ops.Double)
}

func benchType(b *testing.B, p, slot, size int, name string, typ ops.Type) {
	red, _ := ops.ReductionOf(ops.Sum, typ)
	elem := typ.Size()
	x := intranodetest.NewExchange(p)
	b.SetBytes(int64(size))
	var wg sync.WaitGroup
	ready := make(chan struct{})
	var start sync.WaitGroup
	start.Add(p)
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Attach(x.Rank(r), r, p, Options{JobID: "bench", Slot: slot})
			if err != nil {
				b.Error(err)
				start.Done()
				return
			}
			defer g.Close()
			in, out := bytes.Repeat([]byte{0x3c}, size), make([]byte, size) // normal numbers
			counts := make([]int, p)
			for q := range counts {
				counts[q] = size / elem / p
			}
			call := func() {
				switch name {
				case "allreduce":
					g.Allreduce(in, out, red)
				case "allgather":
					g.Allgather(in[:size/p], out, counts, 8)
				default:
					g.ReduceScatter(in, out[:size/p], counts, red)
				}
			}
			call()
			start.Done()
			<-ready
			for range b.N {
				call()
			}
		}()
	}
	start.Wait()
	b.ResetTimer()
	close(ready)
	wg.Wait()
}

// BenchmarkAllgather runs Allgather on p goroutine ranks (2, 4, 8) from
// 4 B to 1 MiB per rank, reading peers' blocks with CMA (at every size)
// and copying them through the slots: the numbers behind CMAMin, as far
// as goroutines of one process can tell (gocoll-compare runs processes).
func BenchmarkAllgather(b *testing.B) {
	for _, p := range []int{2, 4, 8} {
		for size := 4; size <= 4<<20; size *= 8 {
			for _, path := range []string{"cma", "copy"} {
				b.Run(fmt.Sprintf("p=%d/%dB/%s", p, size, path), func(b *testing.B) {
					benchAllgather(b, p, size, Options{JobID: "bench", NoCMA: path == "copy", CMAMin: 1})
				})
			}
		}
	}
}

func benchAllgather(b *testing.B, p, size int, opts Options) {
	x := intranodetest.NewExchange(p)
	b.SetBytes(int64(size))
	var wg, start sync.WaitGroup
	ready := make(chan struct{})
	start.Add(p)
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Attach(x.Rank(r), r, p, opts)
			if err != nil {
				b.Error(err)
				start.Done()
				return
			}
			defer g.Close()
			in, out := make([]byte, size), make([]byte, p*size)
			counts := make([]int, p)
			for q := range counts {
				counts[q] = size
			}
			g.Allgather(in, out, counts, 1)
			start.Done()
			<-ready
			for range b.N {
				if err := g.Allgather(in, out, counts, 1); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	start.Wait()
	b.ResetTimer()
	close(ready)
	wg.Wait()
}

// BenchmarkCells runs the Go half's calls where issue 29 found gocoll
// slower than the faster host MPI, on 2 goroutine ranks, as the MPI
// micro-benchmarks call them (a barrier before every call; MPI_FLOAT
// MPI_SUM for the reductions, sized by the whole vector; allgather of
// bytes, sized by what each rank sends). Beside the mean (ns/op) it
// reports rank 0's median call (med-ns/op), which a loaded machine's
// preemptions move less. For the profile of each cell:
//
//	go test -run XXX -bench 'Cells/allreduce/1M' -cpuprofile cpu.out ./intranode
//	go tool pprof -top intranode.test cpu.out
//
// bench/goprof.sh runs them all, a profile each.
func BenchmarkCells(b *testing.B) {
	cells := []struct {
		name  string
		sizes []int
	}{
		{"allreduce", []int{1 << 20, 2 << 20, 4 << 20}},
		{"reduce_scatter", []int{1 << 20, 2 << 20}},
		{"allgather", []int{16 << 10, 32 << 10, 64 << 10, 128 << 10, 1 << 20, 2 << 20}},
	}
	for _, c := range cells {
		for _, size := range c.sizes {
			b.Run(fmt.Sprintf("%s/%s", c.name, sizeName(size)), func(b *testing.B) {
				benchCell(b, 2, size, c.name, Options{JobID: "bench"})
			})
		}
	}
}
func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dM", n>>20)
	}
	return fmt.Sprintf("%dK", n>>10)
}

func benchCell(b *testing.B, p, size int, name string, opts Options) {
	var times []time.Duration // rank 0's calls
	red, _ := ops.ReductionOf(ops.Sum, ops.Float)
	red = red.Folded() // outside reproducible mode, as coll passes it
	x := intranodetest.NewExchange(p)
	b.SetBytes(int64(size))
	var wg, start sync.WaitGroup
	ready := make(chan struct{})
	start.Add(p)
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Attach(x.Rank(r), r, p, opts)
			if err != nil {
				b.Error(err)
				start.Done()
				return
			}
			defer g.Close()
			in, out := bytes.Repeat([]byte{0x3c}, size), make([]byte, p*size)
			counts := make([]int, p)
			call := func() error {
				switch name {
				case "allreduce":
					return g.Allreduce(in, out[:size], red)
				case "allgather":
					for q := range counts {
						counts[q] = size
					}
					return g.Allgather(in, out, counts, 1)
				default:
					for q := range counts {
						counts[q] = size / 4 / p
					}
					return g.ReduceScatter(in, out[:size/p], counts, red)
				}
			}
			for range 3 {
				call()
			}
			start.Done()
			<-ready
			for i := range b.N {
				if err := g.Barrier(); err != nil {
					b.Error(err)
					return
				}
				t0 := time.Now()
				if err := call(); err != nil {
					b.Error(err)
					return
				}
				if r == 0 {
					times[i] = time.Since(t0)
				}
			}
		}()
	}
	times = make([]time.Duration, b.N)
	start.Wait()
	b.ResetTimer()
	close(ready)
	wg.Wait()
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "med-ns/op")
}
