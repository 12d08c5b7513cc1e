package device

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/ops"
)

// The collectives of a Group. Each rank enqueues all of its call's work
// on its stream at Start (in SyncHost mode, up to each synchronisation,
// where the host waits and meets the others) and the call ends when an
// event recorded after it has completed (Progress polls it, Finish waits
// for it):
//
//	one-shot allreduce   copy the input into my slot; synchronise; one
//	                     kernel reads every rank's slot and reduces them,
//	                     T(0,p), into my output
//	two-shot allreduce   exchange the buffers' IPC descriptors;
//	                     synchronise; one kernel reduces my slice of every
//	                     rank's input and writes it into every rank's
//	                     output; synchronise (2pn bytes in all); where a
//	                     buffer has no IPC handle, staged: the same through
//	                     the slots, a chunk at a time
//	reduce-scatter       the two-shot's first half: my block of every
//	                     rank's input, reduced into my output
//	allgather            its second half: my block copied into every
//	                     rank's output
//
// Reductions are the peer kernels (gpu.PeerKernel) of a predefined op on
// a type with a GPU kernel: T(0,p) bit for bit, 16-bit floats in float32
// rounded once, whatever the route, so GOCOLL_REPRODUCIBLE holds.

// GroupKind is a Group call's collective.
type GroupKind uint8

const (
	GroupAllreduce GroupKind = iota
	GroupReduceScatter
	GroupAllgather
)

// GroupCall is one rank's part of a collective on a Group.
type GroupCall struct {
	Kind GroupKind
	// OneShot: an allreduce through the slots (at most Slot bytes);
	// otherwise two-shot.
	OneShot bool
	// In and Out are device memory in the group's context (In may be
	// host memory for a one-shot allreduce, which copies it in). In place,
	// In is where MPI_IN_PLACE puts the input in Out.
	In, Out gpu.Buffer
	InPlace bool
	// Count is an allreduce's elements; Counts every rank's block of a
	// reduce-scatter or allgather.
	Count    int
	Counts   []int
	ElemSize int
	// Op and Elem choose a reduction's kernel (gpu.PeerKernel).
	Op   ops.Op
	Elem gpu.Elem
}

// ErrNotDirect says a call cannot run on the group because the kernels
// cannot use a rank's buffer directly: it cannot be shared (no IPC
// handle, or a peer cannot map it), or it is not aligned to its element
// (a GPU faults on a misaligned load). Every rank gets it for the same
// call, and the caller runs the call otherwise.
var ErrNotDirect = errors.New("device group: a rank's buffer cannot be used directly by every rank")

// peerCall is a started call: it ends when the group's stream, which
// only the group's calls use while one runs, has done all it was given
// (cuStreamQuery: no event to record).
type peerCall struct {
	c     *GroupCall
	dones []func() // the mappings of peers' buffers the call reads or writes
}

// Start begins c on the calling thread. ErrNotDirect (every rank alike)
// leaves nothing started.
func (g *Group) Start(c *GroupCall) error {
	if g.cur != nil {
		return errors.New("device group: a call is already in progress")
	}
	leave, err := g.w.enter()
	if err != nil {
		return err
	}
	defer leave()
	pc := &peerCall{c: c}
	if err = g.begin(pc); err != nil {
		g.end(pc)
		if !errors.Is(err, ErrNotDirect) {
			g.syncAfterFailure()
		}
		return err
	}
	g.cur = pc
	return nil
}

// Progress reports whether the started call is done, without waiting.
func (g *Group) Progress() (done, moved bool, err error) {
	pc := g.cur
	if pc == nil {
		return true, false, nil
	}
	leave, err := g.w.enter()
	ok := false
	if err == nil {
		ok, err = g.w.drv.StreamQuery(g.st.comp)
		leave()
	}
	if err == nil && !ok {
		return false, false, nil
	}
	g.cur = nil
	g.end(pc)
	return true, true, err
}

// Finish waits for the started call.
func (g *Group) Finish() error {
	pc := g.cur
	if pc == nil {
		return nil
	}
	leave, err := g.w.enter()
	if err == nil {
		err = g.st.waitStream(g.w.drv)
		leave()
	}
	g.cur = nil
	g.end(pc)
	return err
}

// end releases what a call held.
func (g *Group) end(pc *peerCall) {
	for _, done := range pc.dones {
		done()
	}
	pc.dones = nil
}

// syncAfterFailure waits for what was queued before anyone reuses the
// buffers.
func (g *Group) syncAfterFailure() {
	if ev, err := g.st.event(); err == nil {
		if g.w.drv.EventRecord(ev, g.st.comp) == nil {
			g.w.drv.EventSynchronize(ev)
		}
		g.st.putEvents(ev)
	}
}

func (g *Group) begin(pc *peerCall) error {
	c := pc.c
	// An empty buffer may be anything (a rank's empty block of a
	// reduce-scatter, NULL); the one-shot copies its input in from
	// anywhere.
	if c.Out.Len > 0 && !g.Holds(c.Out.Mem) || (c.Kind != GroupAllreduce || !c.OneShot) && c.In.Len > 0 && !g.Holds(c.In.Mem) {
		return fmt.Errorf("device group: the buffers are not device memory of the group's context")
	}
	if err := waitForApplication(g.w.drv, g.st); err != nil {
		return err
	}
	switch {
	case c.Kind == GroupAllreduce && c.OneShot:
		return g.oneShot(pc)
	case c.Kind == GroupAllreduce:
		return g.twoShot(pc)
	case c.Kind == GroupReduceScatter:
		return g.reduceScatter(pc)
	}
	return g.allgather(pc)
}

// Holds reports whether memory m is device memory of the group's
// context, where its calls' buffers must be.
func (g *Group) Holds(m gpu.Memory) bool {
	return m.OnDevice() && (m.Context == g.w.ctx || m.Context == 0 && m.Device == g.w.dev)
}

// oneShot: copy in, synchronise, reduce every rank's slot into Out.
func (g *Group) oneShot(pc *peerCall) error {
	c := pc.c
	n := c.Count * c.ElemSize
	if n > g.opts.Slot {
		return fmt.Errorf("device group: a one-shot allreduce of %d bytes, the slots hold %d", n, g.opts.Slot)
	}
	g.stats.OneShot++
	if n == 0 {
		// No slot used: the parity moves only with a synchronisation,
		// which is what makes a slot safe to rewrite (Group).
		return nil
	}
	k := int(g.calls % 2)
	g.calls++
	slot := g.region.ptr + g.slot(k)
	if err := g.w.drv.MemcpyAsync(slot, c.In.Ptr, n, g.st.comp); err != nil {
		return err
	}
	// A misaligned output takes the result through my other slot, free
	// once the synchronisation is passed (every peer's stream is past its
	// previous call, the last reader of it), then a copy.
	dst := c.Out.Ptr
	if !aligned(dst, c.ElemSize) {
		dst = g.region.ptr + g.slot(1-k)
	}
	dsts := g.region.ptr + g.table(3)
	if err := g.meet(pointerWrites(nil, dsts, dst)); err != nil {
		return err
	}
	if err := g.reduce(c, dsts, 1, g.region.ptr+g.table(k), c.Count, append(g.slotAddrs(k), dst)...); err != nil {
		return err
	}
	if dst != c.Out.Ptr {
		return g.w.drv.MemcpyAsync(c.Out.Ptr, dst, n, g.st.comp)
	}
	return nil
}

// aligned reports whether a kernel may load or store elements of size
// bytes at ptr.
func aligned(ptr uintptr, size int) bool { return size <= 1 || ptr%uintptr(size) == 0 }

// twoShot: my slice of every rank's input, reduced into every rank's
// output, straight in the ranks' buffers (their IPC descriptors
// exchanged), or through the slots where some cannot be shared.
func (g *Group) twoShot(pc *peerCall) error {
	c := pc.c
	ins, outs, err := g.shared(pc, c.In, c.Out, c.ElemSize, true)
	if errors.Is(err, ErrNotDirect) {
		return g.twoShotStaged(pc)
	}
	if err != nil {
		return err
	}
	g.stats.TwoShot++
	lo, n := g.slice(c.Count, c.ElemSize, g.rank)
	off := uintptr(lo * c.ElemSize)
	srcs, dsts := g.region.ptr+g.table(2), g.region.ptr+g.table(3)
	var w []gpu.MemOp
	for q := range g.p {
		w = pointerWrites(w, srcs+uintptr(8*q), ins[q]+off)
		w = pointerWrites(w, dsts+uintptr(8*q), outs[q]+off)
	}
	if err := g.meet(w); err != nil {
		return err
	}
	if n > 0 {
		if err := g.reduce(c, dsts, g.p, srcs, n, g.shifted(append(ins, outs...), off)...); err != nil {
			return err
		}
	}
	return g.meet(nil) // every rank's slices are in my output, and my input is read
}

// twoShotStaged is twoShot through the slots, a chunk of the vector at a
// time: each slot's first half holds this rank's chunk of the input, its
// second half the reduced chunk, where every rank writes its slice.
func (g *Group) twoShotStaged(pc *peerCall) error {
	c := pc.c
	g.stats.Staged++
	half := g.opts.Slot / 2
	chunk := half / c.ElemSize
	if chunk == 0 {
		return fmt.Errorf("device group: an element of %d bytes is larger than half a slot", c.ElemSize)
	}
	srcs, dsts := g.region.ptr+g.table(2), g.region.ptr+g.table(3)
	for at := 0; at < c.Count; at += chunk {
		m := min(chunk, c.Count-at)
		k := int(g.calls % 2)
		g.calls++
		slot := g.region.ptr + g.slot(k)
		if err := g.w.drv.MemcpyAsync(slot, c.In.Ptr+uintptr(at*c.ElemSize), m*c.ElemSize, g.st.comp); err != nil {
			return err
		}
		lo, n := g.slice(m, c.ElemSize, g.rank)
		off := uintptr(lo * c.ElemSize)
		var w []gpu.MemOp
		for q := range g.p {
			w = pointerWrites(w, srcs+uintptr(8*q), g.bases[q]+g.slot(k)+off)
			w = pointerWrites(w, dsts+uintptr(8*q), g.bases[q]+g.slot(k)+uintptr(half)+off)
		}
		if err := g.meet(w); err != nil {
			return err
		}
		if n > 0 {
			if err := g.reduce(c, dsts, g.p, srcs, n, g.shifted(append(g.slotAddrs(k), g.slotAddrs(k)...), off)...); err != nil {
				return err
			}
		}
		if err := g.meet(nil); err != nil {
			return err
		}
		if err := g.w.drv.MemcpyAsync(c.Out.Ptr+uintptr(at*c.ElemSize), slot+uintptr(half), m*c.ElemSize, g.st.comp); err != nil {
			return err
		}
	}
	return nil
}

// reduceScatter: my block of every rank's input, reduced into my output.
func (g *Group) reduceScatter(pc *peerCall) error {
	c := pc.c
	if len(c.Counts) != g.p {
		return fmt.Errorf("device group: %d counts for %d ranks", len(c.Counts), g.p)
	}
	at, n := 0, c.Counts[g.rank]
	for _, m := range c.Counts[:g.rank] {
		at += m
	}
	bytes, largest := n*c.ElemSize, 0
	for _, m := range c.Counts {
		largest = max(largest, m*c.ElemSize)
	}
	if c.InPlace && largest > g.opts.Slot {
		// In place, a rank's result would overwrite what its peers still
		// read, unless it goes through a slot first: some rank's block is
		// larger than one (every rank decides alike).
		return ErrNotDirect
	}
	in := c.In
	if c.InPlace {
		in = c.Out
	}
	// My output is mine alone: not shared, but a kernel writes it.
	ins, _, err := g.shared(pc, in, gpu.Buffer{}, c.ElemSize, c.InPlace || aligned(c.Out.Ptr, c.ElemSize))
	if err != nil {
		return err
	}
	g.stats.TwoShot++
	off := uintptr(at * c.ElemSize)
	dst := c.Out.Ptr
	if c.InPlace { // into a slot, then into place once every peer has read my input
		dst = g.region.ptr + g.slot(int(g.calls%2))
		g.calls++
	}
	srcs, dsts := g.region.ptr+g.table(2), g.region.ptr+g.table(3)
	w := pointerWrites(nil, dsts, dst)
	for q := range g.p {
		w = pointerWrites(w, srcs+uintptr(8*q), ins[q]+off)
	}
	if err := g.meet(w); err != nil {
		return err
	}
	if n > 0 {
		if err := g.reduce(c, dsts, 1, srcs, n, append(g.shifted(ins, off), dst)...); err != nil {
			return err
		}
	}
	if err := g.meet(nil); err != nil {
		return err
	}
	if c.InPlace && bytes > 0 {
		return g.w.drv.MemcpyAsync(c.Out.Ptr, dst, bytes, g.st.comp)
	}
	return nil
}

// allgather: my block copied into every rank's output.
func (g *Group) allgather(pc *peerCall) error {
	c := pc.c
	if len(c.Counts) != g.p {
		return fmt.Errorf("device group: %d counts for %d ranks", len(c.Counts), g.p)
	}
	at := 0
	for _, m := range c.Counts[:g.rank] {
		at += m
	}
	_, outs, err := g.shared(pc, gpu.Buffer{}, c.Out, 1, true) // copies only
	if err != nil {
		return err
	}
	g.stats.TwoShot++
	if err := g.meet(nil); err != nil { // every output is ready for my block
		return err
	}
	off, n := uintptr(at*c.ElemSize), c.Counts[g.rank]*c.ElemSize
	src := c.In.Ptr
	if c.InPlace {
		src = c.Out.Ptr + off
	}
	for q := range g.p {
		if n == 0 || q == g.rank && c.InPlace {
			continue
		}
		if err := g.w.drv.MemcpyAsync(outs[q]+off, src, n, g.st.comp); err != nil {
			return err
		}
	}
	return g.meet(nil) // every rank's block is in my output
}

// slice is rank r's slice of a vector of n elements: the vector cut in
// p pieces of whole 16-byte vectors (the kernel's unit where the buffers
// are aligned), the last ones shorter or empty.
func (g *Group) slice(n, size, r int) (lo, count int) {
	lanes := max(gpu.PeerVectorBytes/size, 1)
	per := ((n+g.p-1)/g.p + lanes - 1) / lanes * lanes
	lo = min(r*per, n)
	return lo, min(per, n-lo)
}

// slotAddrs is every rank's slot k as this rank reaches it.
func (g *Group) slotAddrs(k int) []uintptr {
	a := make([]uintptr, g.p)
	for q := range a {
		a[q] = g.bases[q] + g.slot(k)
	}
	return a
}

func (g *Group) shifted(a []uintptr, off uintptr) []uintptr {
	for i := range a {
		a[i] += off
	}
	return a
}

// pointerWrites appends the two 32-bit writes that store pointer v at
// addr (a pointer table in this rank's region, written by its stream).
func pointerWrites(w []gpu.MemOp, addr, v uintptr) []gpu.MemOp {
	return append(w, gpu.MemOp{Addr: addr, Value: uint32(v), Write: true}, gpu.MemOp{Addr: addr + 4, Value: uint32(uint64(v) >> 32), Write: true})
}

// meet synchronises the ranks at this point of their streams, after
// writes (this rank's pointer tables): SyncMemOps, one batch with the
// writes, my sequence word and a wait for every peer's; SyncHost, the
// writes, then the host waits for the stream and meets the others.
func (g *Group) meet(writes []gpu.MemOp) error {
	drv := g.w.drv
	g.seq++
	if g.opts.Sync == SyncHost {
		// The writes as copies from host memory: a driver may have no
		// stream memory operations (the reason for SyncHost there).
		keep, err := g.copyWrites(writes)
		if err != nil {
			return err
		}
		err = g.sync()
		runtime.KeepAlive(keep) // until the copies are done
		if err != nil {
			return err
		}
		return g.opts.Barrier()
	}
	ops := append(writes, gpu.MemOp{Addr: g.region.ptr, Value: g.seq, Write: true})
	for q := range g.p {
		if q != g.rank {
			ops = append(ops, gpu.MemOp{Addr: g.bases[q], Value: g.seq})
		}
	}
	return drv.StreamBatchMemOp(g.st.comp, ops)
}

// copyWrites queues 32-bit writes as copies from host memory, one per run
// of adjacent words, and returns the memory the copies read.
func (g *Group) copyWrites(writes []gpu.MemOp) ([]byte, error) {
	if len(writes) == 0 {
		return nil, nil
	}
	w := slices.Clone(writes)
	slices.SortFunc(w, func(a, b gpu.MemOp) int { return cmp.Compare(a.Addr, b.Addr) })
	b := make([]byte, 4*len(w))
	start := 0
	for i := range w {
		binary.LittleEndian.PutUint32(b[4*i:], w[i].Value)
		if i+1 < len(w) && w[i+1].Addr == w[i].Addr+4 {
			continue
		}
		if err := g.w.drv.MemcpyAsync(w[start].Addr, uintptr(unsafe.Pointer(&b[4*start])), 4*(i+1-start), g.st.comp); err != nil {
			return nil, err
		}
		start = i + 1
	}
	return b, nil
}

// reduce launches the peer kernel of c's op and type: ndst destinations
// (the pointer table at dsts), p sources (at srcs), n elements; addrs are
// every pointer the tables hold, for the vector variant's alignment.
func (g *Group) reduce(c *GroupCall, dsts uintptr, ndst int, srcs uintptr, n int, addrs ...uintptr) error {
	vec := gpu.PeerVectorAligned(addrs...)
	name := gpu.PeerKernel(c.Op, c.Elem, vec)
	if name == "" {
		return fmt.Errorf("device group: no GPU kernel for %v on %v", c.Op, c.Elem)
	}
	f, err := g.w.function(name)
	if err != nil {
		return err
	}
	g.stats.Launches++
	block := g.w.opts.Block
	lanes := 1
	if vec {
		lanes = gpu.PeerVectorBytes / c.Elem.Size()
	}
	grid := min(max((n/lanes+block-1)/block, 1), g.grid)
	return g.w.drv.Launch(f, grid, block, g.st.comp, uint64(dsts), uint64(ndst), uint64(srcs), uint64(g.p), uint64(n))
}

// shared exchanges this rank's in and out buffers (either may be empty)
// with every rank's and returns them as this rank reaches them, the
// mappings held by pc until the call ends: ErrNotDirect on every rank when
// one of them cannot be shared or mapped, or is not aligned to align
// bytes (the kernels' element), or some rank says it is not ready (its
// other buffers are misaligned).
func (g *Group) shared(pc *peerCall, in, out gpu.Buffer, align int, ready bool) (ins, outs []uintptr, err error) {
	const n = 2 * descLen
	mine := make([]byte, n+1)
	if ready {
		mine[0] = 1
	}
	for i, b := range []gpu.Buffer{in, out} {
		if b.Len == 0 {
			continue
		}
		d := g.descriptorOf(b.Ptr, b.Mem)
		if d.kind == descStaged || !aligned(b.Ptr, align) {
			mine[0] = 0
		}
		d.encode(mine[1+i*descLen : 1+(i+1)*descLen])
	}
	g.stats.Exchanges++
	all, err := g.opts.Exchange(mine)
	if err != nil {
		return nil, nil, err
	}
	ins, outs = make([]uintptr, g.p), make([]uintptr, g.p)
	ok := true
	for q := range g.p {
		rec := all[q*(n+1) : (q+1)*(n+1)]
		ok = ok && rec[0] == 1
		for i, dst := range [][]uintptr{ins, outs} {
			if !ok || []gpu.Buffer{in, out}[i].Len == 0 {
				continue
			}
			d, err := decodeDescriptor(rec[1+i*descLen : 1+(i+1)*descLen])
			if err != nil {
				return nil, nil, err
			}
			switch {
			case q == g.rank || g.x.peers[q] == PeerDirect:
				dst[q] = uintptr(d.addr)
			default:
				ptr, done, err := g.w.open(d)
				if err != nil {
					ok = false
					continue
				}
				pc.dones = append(pc.dones, done)
				dst[q] = ptr + uintptr(d.offset)
			}
		}
	}
	// A rank that could not map a peer's buffer tells everyone.
	agreed := []byte{0}
	if ok {
		agreed[0] = 1
	}
	all, err = g.opts.Exchange(agreed)
	if err != nil {
		return nil, nil, err
	}
	for _, v := range all {
		if v != 1 {
			return nil, nil, ErrNotDirect
		}
	}
	return ins, outs, nil
}
