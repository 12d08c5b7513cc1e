//go:build linux

package intranode

import (
	"fmt"
	"sync"
	"testing"

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

func benchOne(b *testing.B, p, slot, size int, name string) {
	k, _ := ops.Lookup(ops.Sum, ops.Double)
	kernel := Kernel(k)
	x := newExchange(p)
	x.all = true
	b.SetBytes(int64(size))
	var wg sync.WaitGroup
	ready := make(chan struct{})
	var start sync.WaitGroup
	start.Add(p)
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Attach(rankExchange{x, r}, r, p, Options{JobID: "bench", Slot: slot})
			if err != nil {
				b.Error(err)
				start.Done()
				return
			}
			defer g.Close()
			in, out := make([]byte, size), make([]byte, size)
			counts := []int{size / 8 / p, size / 8 / p}
			call := func() {
				switch name {
				case "allreduce":
					g.Allreduce(in, out, 8, kernel)
				case "allgather":
					g.Allgather(in[:size/p], out, counts, 8)
				default:
					g.ReduceScatter(in, out[:size/p], counts, 8, kernel)
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
