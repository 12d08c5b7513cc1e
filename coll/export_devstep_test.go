package coll

// Offloaded reports whether the request's last start ran as one piece on
// a goroutine of its own rather than on a stepper.
func (r *Request) Offloaded() bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.offloaded
}
