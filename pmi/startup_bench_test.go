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
// on one host (3 puts, 4 fences, 2p gets per rank). "proxied" is cards
// with gocollrun's proxies: ranks in hosts of 64, one bulk get per host
// (the proxy's), which the host's other ranks share. ns/op is one whole
// exchange by all p ranks, all on this machine's cores (on a cluster each
// host's share runs on its own).
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
		{"proxied", []int{512, 4096}, nil},
		{"keys", []int{64, 512}, func(c *Client) error { return keysStartup(c, string(card[:40])) }},
	} {
		for _, p := range bc.ps {
			b.Run(fmt.Sprintf("%s/p=%d", bc.name, p), func(b *testing.B) {
				clients := benchJob(b, p)
				gen := 0
				for b.Loop() {
					var wg sync.WaitGroup
					errs := make([]error, p)
					var hosts []chan []string
					for range (p + 63) / 64 {
						hosts = append(hosts, make(chan []string, 64))
					}
					for _, c := range clients {
						if bc.rank == nil {
							wg.Go(func() { errs[c.Rank()] = proxiedStartup(c, gen, string(card), hosts[c.Rank()/64]) })
							continue
						}
						wg.Go(func() { errs[c.Rank()] = bc.rank(c) })
					}
					wg.Wait()
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				gen++
				tr := clients[p-1].Traffic()
				b.ReportMetric(float64(tr.Puts+tr.Gets+tr.Fences+tr.Bulk)/float64(b.N), "roundtrips/rank")
			})
		}
	}
}

// proxiedStartup is one rank's cards exchange where its host's proxy
// makes the bulk get once (the host's first rank here) and the host's
// other ranks take its reply.
func proxiedStartup(c *Client, gen int, card string, host chan []string) error {
	prefix := "gocoll-px" + strconv.Itoa(gen) + "-"
	if err := c.Put(prefix+strconv.Itoa(c.Rank()), card); err != nil {
		return err
	}
	if err := c.Fence(); err != nil {
		return err
	}
	if c.Rank()%64 != 0 {
		<-host
		return nil
	}
	all, err := c.GetRanks(prefix)
	if err != nil {
		return err
	}
	for range 63 {
		host <- all
	}
	return nil
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
