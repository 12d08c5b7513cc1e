//go:build linux

package shm

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gocoll/gocoll/transport"
)

// The benchmarks run between two processes: this one (rank 0) and a child
// that answers. Each sub-benchmark reports, besides ns/op:
//
//	ns/msg        the one-way time of a message
//	GB/s          message bytes per ns/msg
//	memmove-GB/s  copy() of the same size, timed in the same run
//
// Run them with
//
//	go test -run '^$' -bench . ./transport/shm/

var (
	ctrlTag = transport.Tag{Context: 99}
	dataTag = transport.Tag{Context: 100}
)

// ctrl is what rank 0 asks of the child: iters rounds of size bytes,
// ping-pong or both ways at once, with messages of up to eager bytes sent
// eagerly (0: leave the limit alone). Zero iters ends the child.
type ctrl struct {
	size, iters, eager int
	both               bool
}

// startPair starts a two-process job, with or without cross-memory
// attach, and returns rank 0's endpoint; the child exits at the end.
func startPair(b *testing.B, cma bool) *Endpoint {
	dir := b.TempDir()
	job := fmt.Sprintf("b%d-%d", os.Getpid(), time.Now().UnixNano())
	kids := spawnFrom(b, "pong", dir, 2, 1, "SHMTEST_JOB="+job, cmaEnv(cma))
	kvs := &fileKVS{dir: dir, rank: 0, size: 2, deadline: time.Now().Add(30 * time.Second)}
	restore := useCMA(cma)
	ep, err := New(kvs, Options{JobID: job, Timeout: 30 * time.Second})
	restore()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := sendCtrl(ep, ctrl{}); err != nil {
			b.Error(err)
		}
		waitAll(b, kids, 10*time.Second)
		ep.Close()
	})
	return ep
}

func sendCtrl(ep *Endpoint, c ctrl) error {
	var msg [32]byte
	binary.LittleEndian.PutUint64(msg[:], uint64(c.size))
	binary.LittleEndian.PutUint64(msg[8:], uint64(c.iters))
	binary.LittleEndian.PutUint64(msg[16:], uint64(c.eager))
	if c.both {
		msg[24] = 1
	}
	ops := []transport.Op{{Peer: 1, Tag: ctrlTag, Buf: msg[:]}}
	ep.Start(ops)
	return ep.Wait(ops)
}

// rolePong is the child: it does what each ctrl message asks.
func rolePong(kvs *fileKVS) error {
	ep, err := New(kvs, Options{JobID: os.Getenv("SHMTEST_JOB"), Timeout: 60 * time.Second})
	if err != nil {
		return err
	}
	defer ep.Close()
	var msg [32]byte
	var send, recv []byte
	ops := make([]transport.Op, 2)
	for {
		ops[0] = transport.Op{Peer: 0, Tag: ctrlTag, Buf: msg[:], Recv: true}
		if err := exchange(ep, ops[:1]); err != nil {
			return err
		}
		c := ctrl{
			size:  int(binary.LittleEndian.Uint64(msg[:])),
			iters: int(binary.LittleEndian.Uint64(msg[8:])),
			eager: int(binary.LittleEndian.Uint64(msg[16:])),
			both:  msg[24] == 1,
		}
		if c.iters == 0 {
			return nil
		}
		if c.eager > 0 {
			ep.peers[0].eager = c.eager
		}
		if cap(recv) < c.size {
			send, recv = make([]byte, c.size), make([]byte, c.size)
		}
		for range c.iters {
			ops[0] = transport.Op{Peer: 0, Tag: dataTag, Buf: recv[:c.size], Recv: true}
			ops[1] = transport.Op{Peer: 0, Tag: dataTag, Buf: send[:c.size]}
			if c.both {
				err = exchange(ep, ops)
			} else if err = exchange(ep, ops[:1]); err == nil {
				ops[1].Buf = recv[:c.size] // echo
				err = exchange(ep, ops[1:])
			}
			if err != nil {
				return err
			}
		}
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// rounds runs b.N rounds of c (c.iters is b.N) against the child: a
// ping-pong, whose round is two messages, or an exchange, whose round is
// one message each way at once.
func rounds(b *testing.B, ep *Endpoint, c ctrl) {
	send, recv := make([]byte, c.size), make([]byte, c.size)
	if c.eager > 0 {
		ep.peers[1].eager = c.eager
	}
	c.iters = b.N
	if err := sendCtrl(ep, c); err != nil {
		b.Fatal(err)
	}
	ops := make([]transport.Op, 2)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ops[0] = transport.Op{Peer: 1, Tag: dataTag, Buf: recv, Recv: true}
		ops[1] = transport.Op{Peer: 1, Tag: dataTag, Buf: send}
		if err := exchange(ep, ops); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if ops[0].N != c.size {
		b.Fatalf("received %d bytes, want %d", ops[0].N, c.size)
	}
	msg := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	if !c.both {
		msg /= 2
	}
	b.ReportMetric(msg, "ns/msg")
	b.ReportMetric(float64(c.size)/msg, "GB/s")
	b.ReportMetric(memmoveGBs(c.size), "memmove-GB/s")
}

// memmoveGBs times copies of size bytes between two buffers for about
// 20 ms and returns the rate.
func memmoveGBs(size int) float64 {
	src, dst := make([]byte, size), make([]byte, size)
	n := 0
	t0 := time.Now()
	for time.Since(t0) < 20*time.Millisecond {
		for range 64 {
			copy(dst, src)
		}
		n += 64
	}
	return float64(size) * float64(n) / float64(time.Since(t0).Nanoseconds())
}

var benchSizes = []int{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20}

// BenchmarkPingPong: latency and bandwidth of one message at a time, with
// rendezvous messages read by cross-memory attach (CMA, the default) or
// copied through the ring (copy, where CMA is not allowed).
func BenchmarkPingPong(b *testing.B) {
	for _, cma := range []bool{true, false} {
		b.Run(cmaName(cma), func(b *testing.B) {
			ep := startPair(b, cma)
			for _, size := range benchSizes {
				b.Run(sizeName(size), func(b *testing.B) { rounds(b, ep, ctrl{size: size}) })
			}
		})
	}
}

// BenchmarkExchange: both ranks send and receive at once, as in a step of
// a ring collective, where no core sits idle while its peer copies.
func BenchmarkExchange(b *testing.B) {
	for _, cma := range []bool{true, false} {
		b.Run(cmaName(cma), func(b *testing.B) {
			ep := startPair(b, cma)
			for _, size := range benchSizes {
				b.Run(sizeName(size), func(b *testing.B) { rounds(b, ep, ctrl{size: size, both: true}) })
			}
		})
	}
}

// BenchmarkEagerLimit compares, at sizes around the eager limit, the
// eager path (a copy into the ring and one out) with rendezvous: with
// cross-memory attach (a round trip, then one copy) and without (a round
// trip, then the eager path's two copies, chunk by chunk). Both paths run
// in the same pair of processes, one after the other at each size, so that
// they see the same placement on the machine's cores. It chose eagerCMA
// and eagerCopy.
func BenchmarkEagerLimit(b *testing.B) {
	for _, cma := range []bool{true, false} {
		b.Run(cmaName(cma), func(b *testing.B) {
			ep := startPair(b, cma)
			for size := 1 << 10; size <= 64<<10; size *= 2 {
				b.Run(sizeName(size)+"/eager", func(b *testing.B) { rounds(b, ep, ctrl{size: size, eager: size}) })
				b.Run(sizeName(size)+"/rendezvous", func(b *testing.B) { rounds(b, ep, ctrl{size: size, eager: size - 1}) })
			}
		})
	}
}
