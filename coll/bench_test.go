package coll_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/tuner"
)

// benchComms returns p communicators over one in-process job.
func benchComms(b *testing.B, p int) []*coll.Comm {
	tu, _ := tuner.New(envvar.Settings{})
	cfg := &coll.Config{Tuner: tu, JobID: "bench"}
	eps := inproc.New(p)
	ranks := make([]int, p)
	for i := range ranks {
		ranks[i] = i
	}
	comms := make([]*coll.Comm, p)
	var wg sync.WaitGroup
	for r := range comms {
		comms[r], _ = coll.NewComm(eps[r], ranks, 1, "bench", cfg)
		wg.Add(1)
		go func() { defer wg.Done(); comms[r].AttachShared() }() // collective
	}
	wg.Wait()
	b.Cleanup(func() {
		for _, ep := range eps {
			ep.Close()
		}
	})
	return comms
}

// busFactor is nccl-tests' ratio of bus bandwidth to algorithm bandwidth.
func busFactor(c algorithms.Collective, p int) float64 {
	if c == algorithms.Allreduce {
		return 2 * float64(p-1) / float64(p)
	}
	return float64(p-1) / float64(p)
}

// BenchmarkCollectives runs every collective and algorithm on 4 in-process
// ranks from 8 B to 16 MiB of float32, reporting algbw and busbw as
// nccl-tests defines them, and allocations per call (0 in steady state).
func BenchmarkCollectives(b *testing.B) {
	const p = 4
	for _, c := range algorithms.Collectives {
		for _, alg := range algorithms.Names(c) {
			for size := 8; size <= 16<<20; size *= 16 {
				b.Run(fmt.Sprintf("%s/%s/%dB", c.EnvName(), alg, size), func(b *testing.B) {
					comms := benchComms(b, p)
					n := max(size/4/p, 1) * p // float32 elements of the whole vector
					b.SetBytes(int64(n * 4))
					b.ReportAllocs()
					var wg, warm sync.WaitGroup
					start := make(chan struct{})
					errs := make([]error, p)
					warm.Add(p)
					for r, cm := range comms {
						wg.Add(1)
						go func() {
							defer wg.Done()
							send, recv := make([]byte, n*4), make([]byte, n*4)
							a := coll.Args{Send: send, Recv: recv, Type: ops.Float, Op: coll.Op{Builtin: ops.Sum}, Algorithm: alg}
							switch c {
							case algorithms.Allreduce:
								a.Count = n
							case algorithms.Allgather:
								a.Count, a.Send = n/p, send[:n/p*4]
							case algorithms.ReduceScatterBlock:
								a.Count, a.Recv = n/p, recv[:n/p*4]
							case algorithms.ReduceScatter:
								a.Counts, a.Recv = []int{n / p, n / p, n / p, n / p}, recv[:n/p*4]
							}
							for i := -1; i < b.N; i++ {
								if i == 0 { // the warm-up call allocated scratch
									warm.Done()
									<-start
								}
								var err error
								switch c {
								case algorithms.Allreduce:
									err = cm.Allreduce(a)
								case algorithms.ReduceScatter:
									err = cm.ReduceScatter(a)
								case algorithms.ReduceScatterBlock:
									err = cm.ReduceScatterBlock(a)
								default:
									err = cm.Allgather(a)
								}
								if err != nil {
									errs[r] = err
									if i < 0 {
										warm.Done()
									}
									return
								}
							}
						}()
					}
					warm.Wait()
					b.ResetTimer()
					close(start)
					wg.Wait()
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					algbw := float64(n*4) / sec / 1e9
					b.ReportMetric(algbw, "algGB/s")
					b.ReportMetric(algbw*busFactor(c, p), "busGB/s")
				})
			}
		}
	}
}
