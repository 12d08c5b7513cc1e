package coll

// sharedStepper starts o on the shm engine as a resumable call; nil: the
// engine runs it as one piece (Request offloads it).
func (c *Comm) sharedStepper(r *Request, o *op, rt route) (stepper, error) {
	return nil, nil
}
