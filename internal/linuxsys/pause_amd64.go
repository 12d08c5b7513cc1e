package linuxsys

// Pause hints the core that the caller is spinning (x86 PAUSE), which
// saves power and lets a sibling hyperthread or the peer that owns the
// polled cache line make progress.
//
//go:noescape
func Pause()
