package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingKVS counts a rank's requests to the KVS.
type countingKVS struct {
	KVS
	mu                 sync.Mutex
	puts, fences, gets int
}

func (k *countingKVS) Put(key, value string) error {
	k.mu.Lock()
	k.puts++
	k.mu.Unlock()
	return k.KVS.Put(key, value)
}

func (k *countingKVS) Fence() error {
	k.mu.Lock()
	k.fences++
	k.mu.Unlock()
	return k.KVS.Fence()
}

func (k *countingKVS) Get(key string) (string, error) {
	k.mu.Lock()
	k.gets++
	k.mu.Unlock()
	return k.KVS.Get(key)
}

func (k *countingKVS) counts() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return fmt.Sprintf("%d puts, %d fences, %d gets", k.puts, k.fences, k.gets)
}

// treeJob makes the Trees of an n-rank job over a Local KVS.
func treeJob(t *testing.T, n int, timeout time.Duration) ([]*Tree, []*countingKVS) {
	t.Helper()
	kvs := Local(n)
	trees, counts := make([]*Tree, n), make([]*countingKVS, n)
	for r := range n {
		counts[r] = &countingKVS{KVS: kvs[r]}
		trees[r] = NewTree(counts[r], TreeOptions{Addr: "127.0.0.1", Timeout: timeout})
	}
	t.Cleanup(func() {
		for _, tr := range trees {
			tr.Close()
		}
	})
	return trees, counts
}

// onAll runs f on every rank at once and returns their errors, failing the
// test if they do not all return within limit.
func onAll(t *testing.T, n int, limit time.Duration, f func(r int) error) []error {
	t.Helper()
	errs := make([]error, n)
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() { errs[r] = f(r) })
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("the ranks did not return within %v", limit)
	}
	return errs
}

// treeBlob is rank r's blob in call gen: sizes from 0 to 100 KB, from
// the rank, the call and the job size, content from all three.
func treeBlob(p, gen, r int) []byte {
	sizes := []int{0, 1, 115, 100_000, 4097, 33}
	n := sizes[(r+gen)%len(sizes)]
	if p > 64 {
		n = min(n, 200) // 512 ranks x 100 KB x 512 copies would not fit
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r*31 + gen*7 + i)
	}
	return b
}

// Every rank gets every blob, in rank order, over three calls; the
// launcher sees one put (rank 0), one fence and one get (the others), all
// in the first call.
func TestTreeAllgather(t *testing.T) {
	for _, p := range []int{1, 2, 3, 7, 64, 512} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			trees, counts := treeJob(t, p, 20*time.Second)
			for gen := range 3 {
				errs := onAll(t, p, 60*time.Second, func(r int) error {
					all, err := trees[r].Allgather(treeBlob(p, gen, r))
					if err != nil {
						return err
					}
					if len(all) != p {
						return fmt.Errorf("%d blobs for %d ranks", len(all), p)
					}
					for q := range p {
						if !bytes.Equal(all[q], treeBlob(p, gen, q)) {
							return fmt.Errorf("call %d: rank %d's blob has %d bytes, want %d", gen, q, len(all[q]), len(treeBlob(p, gen, q)))
						}
					}
					return nil
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("call %d, rank %d: %v", gen, r, err)
					}
				}
				for r, c := range counts {
					want := "0 puts, 1 fences, 1 gets"
					switch {
					case p == 1:
						want = "0 puts, 0 fences, 0 gets"
					case r == 0:
						want = "1 puts, 1 fences, 0 gets"
					}
					if got := c.counts(); got != want {
						t.Errorf("after call %d, rank %d asked the KVS for %s, want %s", gen, r, got, want)
					}
				}
			}
		})
	}
}

// binomial's tree: every rank but 0 is the child of exactly its parent,
// and the broadcast for p = 7 is the one drawn in tree.go.
func TestBinomial(t *testing.T) {
	for p := 1; p <= 70; p++ {
		seen := make([]int, p)
		for r := range p {
			parent, children := binomial(r, p)
			if (r == 0) != (parent == -1) {
				t.Errorf("p=%d: rank %d's parent is %d", p, r, parent)
			}
			for _, c := range children {
				if pc, _ := binomial(c, p); pc != r || c <= r || c >= p {
					t.Errorf("p=%d: rank %d has child %d, whose parent is %d", p, r, c, pc)
				}
				seen[c]++
			}
		}
		for r := 1; r < p; r++ {
			if seen[r] != 1 {
				t.Errorf("p=%d: rank %d is a child %d times", p, r, seen[r])
			}
		}
	}
	// The drawing: rank r's round is its depth's position in time, as
	// each sender starts its children largest subtree first.
	var rounds [4][]string
	var walk func(r, round int)
	walk = func(r, round int) {
		_, children := binomial(r, 7)
		for i, c := range children {
			rounds[round+i] = append(rounds[round+i], fmt.Sprintf("%d->%d", r, c))
			walk(c, round+i+1)
		}
	}
	walk(0, 1)
	var sb strings.Builder
	for i := 1; i < len(rounds); i++ {
		slices.Sort(rounds[i])
		fmt.Fprintf(&sb, "round %d: %s\n", i, strings.Join(rounds[i], "  "))
	}
	want := "round 1: 0->4\nround 2: 0->2  4->6\nround 3: 0->1  2->3  4->5\n"
	if sb.String() != want {
		t.Errorf("the broadcast for p=7 is\n%s\nnot, as drawn in tree.go,\n%s", sb.String(), want)
	}
}

// dialFrame sends raw bytes to addr and returns the answer byte.
func dialFrame(t *testing.T, addr string, b []byte) byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	var a [1]byte
	if _, err := c.Read(a[:]); err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return a[0]
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

// Frames under another secret, garbage, and a valid frame of an earlier
// call are refused or dropped; the call still gives the right blobs.
func TestTreeRefusesForeignFrames(t *testing.T) {
	const p = 4
	trees, _ := treeJob(t, p, 10*time.Second)
	for gen := range 2 {
		if gen == 1 {
			root := trees[0].addrs[0]
			stranger := &Tree{rank: 1, secret: []byte("not the job's secret")}
			body := append([]byte{0, 0}, "forged"...)
			if a := dialFrame(t, root, stranger.frame(kindGather, 1, body)); a != treeNack {
				t.Errorf("a frame under another secret: answer %q, want %q", a, treeNack)
			}
			if a := dialFrame(t, root, []byte("GET / HTTP/1.0\r\n\r\n...........")); a != treeNack {
				t.Errorf("garbage: answer %q, want %q", a, treeNack)
			}
			// Rank 1's frame of call 0, say a duplicate arriving late:
			// valid, but never to be taken for call 1.
			late := &Tree{rank: 1, secret: trees[0].secret}
			if a := dialFrame(t, root, late.frame(kindGather, 0, body)); a != treeAck {
				t.Errorf("a late frame: answer %q, want %q", a, treeAck)
			}
			// The late frame is acknowledged before it is put in the
			// inbox; call 1 must find it there to drop it.
			waitFor(t, "the late frame in rank 0's inbox", func() bool {
				trees[0].in.mu.Lock()
				defer trees[0].in.mu.Unlock()
				return len(trees[0].in.frames) == 1
			})
		}
		errs := onAll(t, p, 30*time.Second, func(r int) error {
			all, err := trees[r].Allgather(treeBlob(p, gen, r))
			if err != nil {
				return err
			}
			for q := range p {
				if !bytes.Equal(all[q], treeBlob(p, gen, q)) {
					return fmt.Errorf("call %d: rank %d's blob is %q", gen, q, all[q])
				}
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("call %d, rank %d: %v", gen, r, err)
			}
		}
	}
	if got := trees[0].in.rejections(); !strings.Contains(got, "3 frames refused") || !strings.Contains(got, "bad HMAC") && !strings.Contains(got, "late frame of call 0") {
		t.Errorf("rank 0's notes on refused frames: %q", got)
	}
}

// A rank that never comes to the second call: rank 0 gives up after its
// timeout naming it, and tells the others, who fail too.
func TestTreeMissingRankTimesOut(t *testing.T) {
	const p = 5
	timeout := 400 * time.Millisecond
	trees, _ := treeJob(t, p, timeout)
	for r, err := range onAll(t, p, 10*time.Second, func(r int) error {
		_, err := trees[r].Allgather([]byte{byte(r)})
		return err
	}) {
		if err != nil {
			t.Fatalf("call 0, rank %d: %v", r, err)
		}
	}
	began := time.Now()
	errs := onAll(t, p, 10*time.Second, func(r int) error {
		if r == 3 {
			return nil
		}
		_, err := trees[r].Allgather([]byte{byte(r)})
		return err
	})
	if took := time.Since(began); took > 5*timeout {
		t.Errorf("the ranks gave up after %v; the timeout is %v", took, timeout)
	}
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "none from rank 3") {
		t.Errorf("rank 0: %v, want an error naming rank 3", errs[0])
	}
	for _, r := range []int{1, 2, 4} {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "rank 0 gave up") || !strings.Contains(errs[r].Error(), "rank 3") {
			t.Errorf("rank %d: %v, want rank 0's error naming rank 3", r, errs[r])
		}
	}
}

// A rank that cannot listen (its address is not this host's) makes every
// rank fail at once, naming it; so does rank 0.
func TestTreeCannotListen(t *testing.T) {
	for _, bad := range []int{0, 2} {
		t.Run(fmt.Sprintf("rank%d", bad), func(t *testing.T) {
			const p = 4
			trees, _ := treeJob(t, p, 5*time.Second)
			trees[bad].opts.Addr = "192.0.2.1" // TEST-NET-1: on no interface
			errs := onAll(t, p, 4*time.Second, func(r int) error {
				_, err := trees[r].Allgather([]byte{byte(r)})
				return err
			})
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "192.0.2.1") {
					t.Errorf("rank %d: %v, want an error naming the address", r, err)
				}
			}
			if bad != 0 && !strings.Contains(errs[0].Error(), fmt.Sprintf("rank %d cannot take part", bad)) {
				t.Errorf("rank 0: %v, want it to name rank %d", errs[0], bad)
			}
			// The rank that failed to set up fails again at once.
			if _, err := trees[bad].Allgather(nil); err == nil || !strings.Contains(err.Error(), "192.0.2.1") {
				t.Errorf("rank %d's second call: %v, want the first call's error", bad, err)
			}
		})
	}
}

// A rank that cannot reach rank 0 says so, naming the step and the rank.
func TestTreeUnreachable(t *testing.T) {
	const p = 2
	trees, _ := treeJob(t, p, 300*time.Millisecond)
	onAll(t, p, 10*time.Second, func(r int) error {
		_, err := trees[r].Allgather(nil)
		return err
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	trees[1].addrs[0] = closed
	_, err = trees[1].Allgather(nil)
	if err == nil || !strings.Contains(err.Error(), "rank 1 cannot send its blob to rank 0 at "+closed) {
		t.Errorf("rank 1: %v, want an error naming rank 0 and its address", err)
	}
	if _, err := trees[0].Allgather(nil); err == nil || !strings.Contains(err.Error(), "none from rank 1") {
		t.Errorf("rank 0: %v, want an error naming rank 1", err)
	}
}

// After Close, the port is free and Allgather fails.
func TestTreeClose(t *testing.T) {
	trees, _ := treeJob(t, 2, 5*time.Second)
	onAll(t, 2, 10*time.Second, func(r int) error {
		_, err := trees[r].Allgather(nil)
		return err
	})
	addr := trees[1].addrs[1]
	if err := trees[1].Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts after Close", addr)
	}
	if _, err := trees[1].Allgather(nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Allgather after Close: %v", err)
	}
}

// BenchmarkTree is the tree's whole exchange of 115-byte cards (gocoll's
// start-up card) by p ranks, goroutines of one process over loopback:
// "first" is a first call (listeners, KVS, gather, broadcast), "later" a
// call after it. ns/op is one exchange by all p ranks.
//
//	go test -run XXX -bench Tree -benchtime 3x ./bootstrap
func BenchmarkTree(b *testing.B) {
	card := bytes.Repeat([]byte("c"), 115)
	for _, p := range []int{64, 512, 4096} {
		for _, which := range []string{"first", "later"} {
			b.Run(fmt.Sprintf("%s/p=%d", which, p), func(b *testing.B) {
				b.StopTimer()
				for range b.N {
					kvs := Local(p)
					trees := make([]*Tree, p)
					for r := range p {
						trees[r] = NewTree(kvs[r], TreeOptions{Addr: "127.0.0.1", Timeout: time.Minute})
					}
					calls := 1
					if which == "later" {
						calls = 2
					}
					var errs []error
					for call := range calls {
						if call == calls-1 {
							b.StartTimer()
						}
						errs = make([]error, p)
						var wg sync.WaitGroup
						for r := range p {
							wg.Go(func() { _, errs[r] = trees[r].Allgather(card) })
						}
						wg.Wait()
					}
					b.StopTimer()
					for _, tr := range trees {
						tr.Close()
					}
					if err := errors.Join(errs...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
