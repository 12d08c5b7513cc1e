package gpu

// Buffer is a caller's buffer by address: where it starts, its length in
// bytes and where it lives (Runtime.Classify). Device memory travels as a
// Buffer from the entry that classified it to the executor that reaches it
// through the driver, never as Go bytes, which the CPU could touch.
type Buffer struct {
	Ptr uintptr
	Len int
	Mem Memory
}

// OnDevice reports whether the buffer must be reached through CUDA.
func (b Buffer) OnDevice() bool { return b.Mem.OnDevice() }
