//go:build !amd64

package linuxsys

// Pause hints the core that the caller is spinning (a no-op here).
func Pause() {}
