package coll

// Stepped reports whether r's call has begun and, if so, whether it moved
// through a stepper rather than as one piece on a goroutine of its own.
func (r *Request) Stepped() (begun, stepped bool) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.begun, r.begun && !r.offloaded
}
