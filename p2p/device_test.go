package p2p_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/p2p"
)

// gpuRank is one rank of a device test: a fake CUDA process of its own on
// one fake node, whose application initialised device 0.
type gpuRank struct {
	c    *p2p.Comm
	r    int
	proc *fake.Process
	rt   *gpu.Runtime
}

// runDevice runs f on n ranks as run does, each with a fake CUDA process
// (device memory there faults on any CPU access).
func runDevice(t *testing.T, n int, opts fake.Options, f func(g gpuRank) error) {
	t.Helper()
	m := fake.NewMachine(opts)
	procs := make([]*fake.Process, n)
	rts := make([]*gpu.Runtime, n)
	for r := range n {
		procs[r] = m.NewProcess()
		procs[r].AppInit(0)
		rt, err := gpu.NewRuntime(procs[r], gpu.Auto)
		if err != nil {
			t.Fatal(err)
		}
		rts[r] = rt
	}
	run(t, n, func(c *p2p.Comm, r int) error {
		return f(gpuRank{c: c, r: r, proc: procs[r], rt: rts[r]})
	})
}

// buf is n bytes of device memory holding data (nil: a pattern no
// message has).
func (g gpuRank) buf(n int, data []byte) gpu.Buffer {
	p := g.proc.Malloc(0, n)
	if data == nil {
		data = bytes.Repeat([]byte{0xa5}, n)
	}
	g.proc.Write(p, data)
	return gpu.Buffer{Ptr: p, Len: n, Mem: g.rt.Classify(p)}
}

func (g gpuRank) read(b gpu.Buffer) []byte { return g.proc.Read(b.Ptr, b.Len) }

func (g gpuRank) send(b gpu.Buffer, dest, tag int) error {
	r, err := g.c.IsendDevice(g.rt, b, dest, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

func (g gpuRank) recv(b gpu.Buffer, src, tag int) (p2p.Status, error) {
	r, err := g.c.IrecvDevice(g.rt, b, src, tag)
	if err != nil {
		return p2p.Status{}, err
	}
	return r.Wait()
}

// Device to device, device to host and host to device, eager and
// rendezvous sizes, on streams that run late at random.
func TestDeviceSizes(t *testing.T) {
	runDevice(t, 2, fake.Options{Jitter: 100 * time.Microsecond}, func(g gpuRank) error {
		for _, n := range []int{1, p2p.Eager, p2p.Eager + 1, 300007} {
			if g.r == 0 {
				if err := g.send(g.buf(n, payload(n, 1)), 1, 1); err != nil {
					return err
				}
				if err := send(g.c, payload(n, 2), 1, 2); err != nil { // host to device
					return err
				}
				host := make([]byte, n)
				if _, err := recv(g.c, host, 1, 3); err != nil || !bytes.Equal(host, payload(n, 3)) {
					return fmt.Errorf("size %d: device to host: %v", n, err)
				}
				continue
			}
			for tag := 1; tag <= 2; tag++ {
				b := g.buf(n, nil)
				st, err := g.recv(b, 0, tag)
				if err != nil || st.Source != 0 || st.Tag != tag || st.Count != n {
					return fmt.Errorf("size %d, tag %d: %+v %v", n, tag, st, err)
				}
				if !bytes.Equal(g.read(b), payload(n, tag)) {
					return fmt.Errorf("size %d, tag %d: wrong bytes in device memory", n, tag)
				}
			}
			if err := g.send(g.buf(n, payload(n, 3)), 0, 3); err != nil {
				return err
			}
		}
		return nil
	})
}

// A receive into device memory that is too short: MPI_ERR_TRUNCATE's
// error, the count that fit, those bytes copied up and nothing past the
// buffer. Wildcards, PROC_NULL and messages to oneself, on device memory.
func TestDeviceTruncationWildcardsSelf(t *testing.T) {
	runDevice(t, 3, fake.Options{}, func(g gpuRank) error {
		const tag = 5
		if g.r > 0 {
			for _, n := range []int{100, 3 * p2p.Eager} {
				if err := g.send(g.buf(n, payload(n, g.r)), 0, tag+g.r); err != nil {
					return err
				}
			}
			return nil
		}
		seen := map[int]int{}
		for range 4 {
			whole := g.buf(20, nil)
			short := gpu.Buffer{Ptr: whole.Ptr, Len: 10, Mem: whole.Mem}
			st, err := g.recv(short, p2p.AnySource, p2p.AnyTag)
			if !errors.Is(err, p2p.ErrTruncate) || st.Count != 10 || st.Tag != tag+st.Source {
				return fmt.Errorf("a long message into 10 bytes: %+v %v", st, err)
			}
			got := g.read(whole)
			if !bytes.Equal(got[:10], payload(10, st.Source)) || !bytes.Equal(got[10:], bytes.Repeat([]byte{0xa5}, 10)) {
				return fmt.Errorf("truncated message from %d: device memory %v", st.Source, got)
			}
			seen[st.Source]++
		}
		if seen[1] != 2 || seen[2] != 2 {
			return fmt.Errorf("messages by source: %v", seen)
		}
		b := g.buf(8, nil)
		if st, err := g.recv(b, p2p.ProcNull, tag); err != nil || st.Source != p2p.ProcNull || st.Count != 0 {
			return fmt.Errorf("PROC_NULL receive: %+v %v", st, err)
		}
		if err := g.send(b, p2p.ProcNull, tag); err != nil {
			return err
		}
		// To oneself, posted after the send and before it.
		n := 2 * p2p.Eager
		if err := g.send(g.buf(n, payload(n, 9)), 0, 6); err != nil {
			return err
		}
		in := g.buf(n, nil)
		if st, err := g.recv(in, 0, 6); err != nil || st.Source != 0 || !bytes.Equal(g.read(in), payload(n, 9)) {
			return fmt.Errorf("device message to oneself: %+v %v", st, err)
		}
		r, err := g.c.IrecvDevice(g.rt, in, 0, 7)
		if err != nil {
			return err
		}
		if err := g.send(g.buf(n, payload(n, 10)), 0, 7); err != nil {
			return err
		}
		if st, err := r.Wait(); err != nil || !bytes.Equal(g.read(in), payload(n, 10)) {
			return fmt.Errorf("device message to oneself, receive first: %+v %v", st, err)
		}
		return nil
	})
}

// Nonblocking on device memory: receives posted first, sends after,
// completed with Test in any order; a completed request tests done again
// with the same status, and its bytes are in device memory.
func TestDeviceNonblocking(t *testing.T) {
	const n = 4
	runDevice(t, n, fake.Options{Jitter: 50 * time.Microsecond}, func(g gpuRank) error {
		size := func(q int) int { return []int{7, p2p.Eager + 3, 70000, 0}[q] }
		var reqs []*p2p.Request
		bufs := make([]gpu.Buffer, n)
		for q := range n {
			bufs[q] = g.buf(max(size(q), 1), nil)
			bufs[q].Len = size(q)
			req, err := g.c.IrecvDevice(g.rt, bufs[q], q, 9)
			if err != nil {
				return err
			}
			reqs = append(reqs, req)
		}
		for q := range n {
			out := g.buf(max(size(g.r), 1), payload(max(size(g.r), 1), g.r*n+q))
			out.Len = size(g.r)
			req, err := g.c.IsendDevice(g.rt, out, q, 9)
			if err != nil {
				return err
			}
			reqs = append(reqs, req)
		}
		status := make([]p2p.Status, len(reqs))
		for pending := len(reqs); pending > 0; {
			pending = 0
			for i, req := range reqs {
				done, st, err := req.Test()
				if err != nil {
					return err
				}
				if !done {
					pending++
				} else if i < n {
					status[i] = st
				}
			}
		}
		for q := range n {
			if status[q].Count != size(q) || status[q].Source != q {
				return fmt.Errorf("from %d: status %+v", q, status[q])
			}
			if size(q) > 0 && !bytes.Equal(g.read(bufs[q]), payload(size(q), q*n+g.r)) {
				return fmt.Errorf("from %d: wrong bytes in device memory", q)
			}
			if st, err := reqs[q].Wait(); err != nil || st != status[q] {
				return fmt.Errorf("from %d: Wait after Test: %+v %v, want %+v", q, st, err, status[q])
			}
		}
		return nil
	})
}

// The contract of device calls: a send reads what the application wrote
// on the legacy or per-thread default stream before it, however late that
// lands; a receive's bytes land after what the application queued on them
// before the receive was posted.
func TestDeviceDefaultStreams(t *testing.T) {
	runDevice(t, 2, fake.Options{}, func(g gpuRank) error {
		runtime.LockOSThread() // the per-thread default stream is this thread's
		defer runtime.UnlockOSThread()
		const n = 3000
		for k, s := range []gpu.Stream{gpu.StreamLegacy, gpu.StreamPerThread} {
			if g.r == 0 {
				b := g.buf(n, nil)
				g.proc.AppWriteAsync(0, s, b.Ptr, payload(n, k), 30*time.Millisecond)
				if err := g.send(b, 1, k); err != nil {
					return err
				}
				continue
			}
			b := g.buf(n, nil)
			g.proc.AppWriteAsync(0, s, b.Ptr, payload(n, 50), 30*time.Millisecond)
			if _, err := g.recv(b, 0, k); err != nil {
				return err
			}
			if got := g.read(b); !bytes.Equal(got, payload(n, k)) {
				what := "stale bytes"
				if bytes.Equal(got, payload(n, 50)) {
					what = "the application's earlier write landed over the message"
				}
				return fmt.Errorf("stream %#x: %s", s, what)
			}
		}
		return nil
	})
}
