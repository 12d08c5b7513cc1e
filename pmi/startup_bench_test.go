package pmi

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"testing"
)

// BenchmarkStartup is the launcher's side of a job's start-up at scale:
// one gocollrun PMI server and p clients (goroutines on socket pairs, so
// p = 4096 fits one machine), each exchanging a card of the size gocoll's
// ranks publish (~115 bytes). "cards" is today's exchange (Allgather: one
// put, one fence, one bulk get); "keys" is the one before it, as measured
// on one host (3 puts, 4 fences, 2p gets per rank). ns/op is one whole
// exchange by all p ranks.
//
//	go test -run XXX -bench Startup -benchtime 3x ./pmi
func BenchmarkStartup(b *testing.B) {
	card := bytes.Repeat([]byte("c"), 115)
	for _, bc := range []struct {
		name string
		ps   []int
		rank func(c *Client) error
	}{
		{"cards", []int{64, 512, 4096}, func(c *Client) error {
			_, err := c.Allgather(card)
			return err
		}},
		{"keys", []int{64, 512}, func(c *Client) error { return keysStartup(c, string(card[:40])) }},
	} {
		for _, p := range bc.ps {
			b.Run(fmt.Sprintf("%s/p=%d", bc.name, p), func(b *testing.B) {
				clients := benchJob(b, p)
				for b.Loop() {
					var wg sync.WaitGroup
					errs := make([]error, p)
					for _, c := range clients {
						wg.Go(func() { errs[c.Rank()] = bc.rank(c) })
					}
					wg.Wait()
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				tr := clients[p-1].Traffic()
				b.ReportMetric(float64(tr.Puts+tr.Gets+tr.Fences+tr.Bulk)/float64(b.N), "roundtrips/rank")
			})
		}
	}
}

// keysStartup is the key-value traffic of start-up before cards, on one
// host: host names, shm's cards and job name, and its two fences for the
// segment.
func keysStartup(c *Client, v string) error {
	me := strconv.Itoa(c.Rank())
	for round := range 2 {
		if err := c.Put(fmt.Sprintf("k%d-%s", round, me), v); err != nil {
			return err
		}
		if round == 1 && c.Rank() == 0 {
			if err := c.Put("job", v); err != nil {
				return err
			}
		}
		if err := c.Fence(); err != nil {
			return err
		}
		for r := range c.Size() {
			if _, err := c.Get(fmt.Sprintf("k%d-%d", round, r)); err != nil {
				return err
			}
		}
	}
	for range 2 {
		if err := c.Fence(); err != nil {
			return err
		}
	}
	return nil
}

// benchJob is startJob for benchmarks.
func benchJob(b *testing.B, n int) []*Client {
	s := NewServer(n, "kvs_bench")
	b.Cleanup(s.Close)
	clients := make([]*Client, n)
	for r := range n {
		a, bb := socketpair(b)
		go s.ServeConn(fdConn(b, a), r)
		conn := fdConn(b, bb)
		c, err := newClient(conn, bufio.NewReaderSize(conn, maxLine), r, n)
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
		b.Cleanup(func() { c.Finalize() })
		clients[r] = c
	}
	return clients
}
