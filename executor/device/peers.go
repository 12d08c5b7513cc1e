package device

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"strings"

	"github.com/gocoll/gocoll/gpu"
)

// Peer says how this rank reaches another rank's device memory.
type Peer uint8

const (
	// PeerStaged: through pinned host memory and the transport (another
	// node, or IPC disabled).
	PeerStaged Peer = iota
	// PeerIPC: a process on the same node: CUDA IPC, falling back to
	// staging for memory that has no handle or that this process cannot
	// map.
	PeerIPC
	// PeerDirect: the same process (ranks that are goroutines): device
	// addresses are valid as they are.
	PeerDirect
)

func (p Peer) String() string { return [...]string{"staged", "ipc", "direct"}[p] }

// RecordLen is the length of a Record.
const RecordLen = 32

// Record describes this rank for the communicator's one-time exchange:
// its node (a hash of the host name and the kernel's boot id: CUDA IPC
// works between processes of one running kernel) and its process's CUDA
// runtime (ranks with the same one share an address space).
func Record(rt *gpu.Runtime, ipc bool) []byte {
	b := make([]byte, RecordLen)
	if ipc {
		host, _ := os.Hostname()
		boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
		h := sha256.Sum256([]byte(host + "\x00" + strings.TrimSpace(string(boot))))
		copy(b[0:16], h[:16])
	}
	binary.LittleEndian.PutUint64(b[16:], rt.ID())
	b[24] = 1
	return b
}

// Peers computes, from every rank's Record (in rank order), how rank me
// reaches each rank. The answer is symmetric, so both ends of a transfer
// agree on its protocol.
func Peers(records [][]byte, me int) ([]Peer, error) {
	for q, rec := range records {
		if len(rec) != RecordLen || rec[24] != 1 {
			return nil, errors.New("device executor: rank " + itoa(q) + " sent a malformed record (does every rank pass device memory?)")
		}
	}
	out := make([]Peer, len(records))
	mine := records[me]
	var zero [16]byte
	for q, rec := range records {
		switch {
		case q == me:
			out[q] = PeerDirect
		case bytes.Equal(rec[16:24], mine[16:24]):
			out[q] = PeerDirect
		case !bytes.Equal(mine[0:16], zero[:]) && bytes.Equal(rec[0:16], mine[0:16]):
			out[q] = PeerIPC
		}
	}
	return out, nil
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return string(b[i:])
}

// SetPeers installs the result of Peers; until then every transfer is
// staged.
func (x *Executor) SetPeers(p []Peer) {
	x.mu.Lock()
	x.peers = p
	x.mu.Unlock()
}

// HasPeers reports whether SetPeers was called.
func (x *Executor) HasPeers() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.peers != nil
}

func (x *Executor) peer(q int) Peer {
	if q < len(x.peers) {
		return x.peers[q]
	}
	return PeerStaged
}

// The descriptor a sender on the same node sends instead of data.
const (
	descLen   = 152
	descMagic = 0x63736467 // "gdsc"

	descStaged = 0 // the data follows as segments
	descIPC    = 1 // map handle, read len bytes at offset
	descDirect = 2 // read len bytes at addr (same process)

	ackLen    = 8
	ackMagic  = 0x6b636167 // "gack"
	ackDone   = 0          // copied: the sender may reuse its memory
	ackStaged = 1          // could not map: send the data staged
	ackFailed = 2          // the copy failed
)

// A descIPC descriptor names the sender's allocation (its runtime ID,
// base address and buffer id) beside the handle, so that the receiver
// can tell a new allocation at a freed one's address from the one it
// mapped (see the mapping policy in workspace.go).
type descriptor struct {
	kind   uint32
	len    uint64
	offset uint64 // from base
	addr   uint64
	handle gpu.IPCHandle
	rt     uint64 // the sender's runtime ID
	base   uint64 // the allocation's base in the sender
	buf    uint64 // its buffer id (0 if the driver gave none)
	bus    string // the sender's device
}

func (d descriptor) encode(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], descMagic)
	binary.LittleEndian.PutUint32(b[4:], d.kind)
	binary.LittleEndian.PutUint64(b[8:], d.len)
	binary.LittleEndian.PutUint64(b[16:], d.offset)
	binary.LittleEndian.PutUint64(b[24:], d.addr)
	copy(b[32:96], d.handle[:])
	binary.LittleEndian.PutUint64(b[96:], d.rt)
	binary.LittleEndian.PutUint64(b[104:], d.base)
	binary.LittleEndian.PutUint64(b[112:], d.buf)
	clear(b[120:])
	copy(b[120:], d.bus)
}

func decodeDescriptor(b []byte) (descriptor, error) {
	if len(b) != descLen || binary.LittleEndian.Uint32(b[0:]) != descMagic {
		return descriptor{}, errors.New("not a device transfer descriptor (does every rank pass device memory?)")
	}
	d := descriptor{
		kind:   binary.LittleEndian.Uint32(b[4:]),
		len:    binary.LittleEndian.Uint64(b[8:]),
		offset: binary.LittleEndian.Uint64(b[16:]),
		addr:   binary.LittleEndian.Uint64(b[24:]),
		rt:     binary.LittleEndian.Uint64(b[96:]),
		base:   binary.LittleEndian.Uint64(b[104:]),
		buf:    binary.LittleEndian.Uint64(b[112:]),
		bus:    string(bytes.TrimRight(b[120:], "\x00")),
	}
	copy(d.handle[:], b[32:96])
	if d.kind > descDirect {
		return descriptor{}, errors.New("unknown device transfer descriptor")
	}
	return d, nil
}
