//go:build linux

package shm

import (
	"bytes"
	"testing"
	"unsafe"
)

// The overlay types have the sizes the layout reserves for them.
func TestLayoutSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"header", unsafe.Sizeof(header{}), 128},
		{"ctl", unsafe.Sizeof(ctl{}), ctlLen},
		{"ringHeader", unsafe.Sizeof(ringHeader{}), ringHdr},
		{"recHeader", unsafe.Sizeof(recHeader{}), recHdrLen},
		{"ctl.bell", unsafe.Offsetof(ctl{}.bell), cacheLine},
		{"ringHeader.head", unsafe.Offsetof(ringHeader{}.head), cacheLine},
		{"ringHeader.waiting", unsafe.Offsetof(ringHeader{}.waiting), 2 * cacheLine},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	for _, n := range []int{2, 3, 8, 9, 64, 200} {
		l := newLayout(n, ringCapFor(n))
		if l.ringOff%4096 != 0 || l.stride%cacheLine != 0 || l.ringCap&(l.ringCap-1) != 0 || l.total < l.ringOff+n*n*l.stride {
			t.Errorf("n=%d: bad layout %+v", n, l)
		}
	}
}

// Payloads wrap around the end of the ring and come back whole.
func TestRingWrap(t *testing.T) {
	data := make([]byte, 1024)
	var hdr ringHeader
	prod, cons := newRing(&hdr, data), newRing(&hdr, data)
	for i := range 200 {
		msg := pattern(i*7%300, i)
		need := recLen(len(msg))
		if prod.room(need) < need {
			t.Fatalf("message %d: no room in an empty ring", i)
		}
		*prod.header(prod.pos) = recHeader{kind: recEager, plen: uint32(len(msg))}
		prod.put(prod.pos+recHdrLen, msg)
		prod.pos += uint64(need)
		prod.publish()
		if cons.available() != prod.pos {
			t.Fatalf("message %d: tail not seen", i)
		}
		h := cons.header(cons.pos)
		got := make([]byte, h.plen)
		cons.get(cons.pos+recHdrLen, got)
		cons.pos += uint64(recLen(int(h.plen)))
		cons.release()
		if !bytes.Equal(got, msg) {
			t.Fatalf("message %d corrupted", i)
		}
	}
	if prod.pos < 10*uint64(len(data)) {
		t.Fatal("the test did not wrap")
	}
}
