//go:build linux

package intranode

import "unsafe"

// Constant is one fact of the segment's layout that code outside Go needs
// to follow the protocol.
type Constant struct {
	Name  string // upper case, without a prefix
	Value int
	Doc   string
}

// LayoutConstants are the segment's fixed offsets and sizes. The C half of
// the engine (package intranode/engine) has them from its generated header
// (go generate ./intranode/engine), not from copies: a change here changes
// the header, and the header's test fails until it is regenerated.
func LayoutConstants() []Constant {
	var c control
	var b bell
	return []Constant{
		{"LINE", cacheLine, "bytes of a control line (and of the bell line)"},
		{"BELL_OFFSET", bellOffset, "offset of the bell line in the segment"},
		{"BELL_SEQ", int(unsafe.Offsetof(b.seq)), "offset in the bell line of the futex word (uint32) sleepers wait on"},
		{"BELL_SLEEPERS", int(unsafe.Offsetof(b.sleepers)), "offset in the bell line of the count of sleepers (int32)"},
		{"CTL_OFFSET", ctlOffset, "offset of rank 0's control line; rank q's is LINE*q further"},
		{"CTL_STEP", int(unsafe.Offsetof(c.step)), "offset in a control line of the steps published (uint64)"},
		{"CTL_PID", int(unsafe.Offsetof(c.pid)), "offset in a control line of its rank's process id (uint32)"},
		{"CTL_ADDR", int(unsafe.Offsetof(c.addr)), "offset in a control line of the address of its rank's block in a CMA allgather (uint64)"},
		{"CTL_ONE_STEP", int(unsafe.Offsetof(c.oneStep)), "offset in a control line of the longest allreduce (bytes) its rank takes in one step (uint32)"},
		{"CTL_PIECE", int(unsafe.Offsetof(c.piece)), "offset in a control line of the most bytes of every block a reduce_scatter step moves (uint32)"},
		{"CTL_CMA_MIN", int(unsafe.Offsetof(c.cmaMin)), "offset in a control line of the shortest allgather block (bytes) read by CMA, 0 for none (uint32)"},
		{"SETS", sets, "buffer sets: step k writes set k % SETS; slot q of set s is at data + (s*p + q)*slot"},
		{"ROTATE_MIN", rotateMin, "from this many bytes a step places, its data moves around the slot: see placed"},
		{"ROTATE_STEP", rotateStep, "by a multiple of this many bytes"},
		{"DATA_ALIGN", dataAlign, "data: the first multiple of DATA_ALIGN from CTL_OFFSET + LINE*p; the SETS result slots follow the data sets"},
	}
}
