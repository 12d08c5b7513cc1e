package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// A user-space stand-in for tc netem's delay, jitter and reordering, for
// kernels built without sch_netem (as some VMs' are): iptables sends the
// packets of the emulated link to an NFQUEUE, and serveQueue gives each
// its verdict (accept) after the delay, plus or minus the jitter, except
// reorder percent of them, accepted at once, which overtake the others,
// as netem's "reorder" does. Loss needs no queue: iptables' statistic
// match drops packets at random.
//
// The queue speaks nfnetlink_queue over a netlink socket: bind the queue
// to IPv4 and to the queue number, ask for metadata only (the packet id,
// no payload), and fail open (accept) when the queue overflows.

const (
	nfnlSubsysQueue = 3
	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqaCfgQueueMax = 3
	nfqaCfgMask     = 4
	nfqaCfgFlags    = 5
	nfqaPacketHdr   = 1
	nfqaVerdictHdr  = 2

	nfqnlCfgCmdBind   = 1
	nfqnlCfgCmdPfBind = 3
	nfqnlCopyMeta     = 1
	nfqaCfgFFailOpen  = 1
	nfAccept          = 1
)

// serveQueue serves NFQUEUE queue until the process is killed.
func serveQueue(queue int, delay, jitter time.Duration, reorder float64) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<20)
	q := &nfq{fd: fd, queue: uint16(queue)}
	// Bind IPv4 (a no-op on new kernels), then the queue; metadata only;
	// a long queue that fails open.
	cmd := func(c uint8, pf uint16) []byte {
		b := []byte{c, 0, 0, 0}
		binary.BigEndian.PutUint16(b[2:], pf)
		return attr(nfqaCfgCmd, b)
	}
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0xffff)
	params[4] = nfqnlCopyMeta
	maxlen := binary.BigEndian.AppendUint32(nil, 1<<16)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFFailOpen)
	for _, m := range [][]byte{
		q.msg(nfqnlMsgConfig, syscall.AF_INET, 0, cmd(nfqnlCfgCmdPfBind, syscall.AF_INET)),
		q.msg(nfqnlMsgConfig, syscall.AF_UNSPEC, q.queue, cmd(nfqnlCfgCmdBind, syscall.AF_INET)),
		q.msg(nfqnlMsgConfig, syscall.AF_UNSPEC, q.queue, attr(nfqaCfgParams, params)),
		q.msg(nfqnlMsgConfig, syscall.AF_UNSPEC, q.queue, attr(nfqaCfgQueueMax, maxlen)),
		q.msg(nfqnlMsgConfig, syscall.AF_UNSPEC, q.queue, append(attr(nfqaCfgMask, flags), attr(nfqaCfgFlags, flags)...)),
	} {
		if err := q.send(m); err != nil {
			return fmt.Errorf("configuring queue %d: %w", queue, err)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(queue)))
	buf := make([]byte, 1<<16)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err == syscall.EINTR || err == syscall.ENOBUFS {
			continue
		}
		if err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		for b := buf[:n]; len(b) >= syscall.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			typ := binary.NativeEndian.Uint16(b[4:])
			if l < syscall.NLMSG_HDRLEN || l > len(b) {
				break
			}
			if typ == nfnlSubsysQueue<<8|nfqnlMsgPacket {
				if id, ok := packetID(b[syscall.NLMSG_HDRLEN+4 : l]); ok {
					d := time.Duration(0)
					if rng.Float64()*100 >= reorder {
						d = delay + time.Duration((rng.Float64()*2-1)*float64(jitter))
					}
					if d <= 0 {
						q.accept(id)
					} else {
						time.AfterFunc(d, func() { q.accept(id) })
					}
				}
			}
			b = b[min(len(b), (l+3)&^3):]
		}
	}
}

type nfq struct {
	fd    int
	queue uint16
	mu    sync.Mutex
	seq   uint32
}

// msg builds a netlink message of the queue subsystem: header, nfgenmsg,
// attributes.
func (q *nfq) msg(typ uint16, family uint8, resID uint16, attrs []byte) []byte {
	q.seq++
	b := make([]byte, syscall.NLMSG_HDRLEN+4, syscall.NLMSG_HDRLEN+4+len(attrs))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|typ)
	binary.NativeEndian.PutUint16(b[6:], syscall.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:], q.seq)
	b[syscall.NLMSG_HDRLEN] = family
	binary.BigEndian.PutUint16(b[syscall.NLMSG_HDRLEN+2:], resID)
	b = append(b, attrs...)
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	return b
}

func (q *nfq) send(m []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return syscall.Sendto(q.fd, m, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK})
}

// accept gives packet id the verdict accept.
func (q *nfq) accept(id uint32) {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v, nfAccept)
	binary.BigEndian.PutUint32(v[4:], id)
	q.mu.Lock()
	m := q.msg(nfqnlMsgVerdict, syscall.AF_UNSPEC, q.queue, attr(nfqaVerdictHdr, v))
	q.mu.Unlock()
	q.send(m)
}

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, data []byte) []byte {
	b := make([]byte, 4, (4+len(data)+3)&^3)
	binary.NativeEndian.PutUint16(b, uint16(4+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// packetID finds the packet id in a packet message's attributes.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & 0x3fff
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		attrs = attrs[min(len(attrs), (l+3)&^3):]
	}
	return 0, false
}
