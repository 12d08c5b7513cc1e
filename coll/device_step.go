package coll

// deviceStepper starts o on the device executor as a resumable call;
// nil: the executor runs it as one piece (Request offloads it).
func (c *Comm) deviceStepper(r *Request, o *op, rt route) (stepper, error) {
	return nil, nil
}
