package coll

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
)

// Reproducible mode (GOCOLL_REPRODUCIBLE=1, Config.Reproducible): a call
// whose result depends on the order of its terms asks the tuner for an
// algorithm that computes the canonical association (Params.Reproducible,
// algorithms/canonical.go). A 16-bit floating type is reduced in float32
// and rounded once: the call runs on float32 copies of its buffers
// (runWide), so every algorithm, the shared-memory engine included, sees
// float32 and the one rounding happens here.

// reproducible reports whether call a must return the canonical
// association: the mode is on (for the job, or for the call) and the op is a floating-point MPI_SUM or
// MPI_PROD, or a commutative user-defined op (whose exactness gocoll
// cannot know). Non-commutative ops are combined in rank order by the
// algorithms that allow them, as in every mode.
func (c *Comm) reproducible(a Args) bool {
	if !(c.cfg.Reproducible || a.Reproducible) || !a.Op.commutative() {
		return false
	}
	return a.Op.Builtin == ops.OpNull || ops.OrderDependent(a.Op.Builtin, a.Type)
}

// wideType returns the float32 type a reproducible call of a 16-bit
// floating type runs in, or ok false.
func wideType(p algorithms.Params, a Args) (ops.Type, bool) {
	if !p.Reproducible || a.Op.Builtin == ops.OpNull {
		return ops.TypeNull, false
	}
	return ops.Wide(a.Type)
}

// runWide runs a reproducible reduction of 16-bit floats, checked as cl,
// on float32 copies of its buffers, then rounds the first result bytes of
// the float32 output into the call's output: result is the bytes of the
// call's result (the whole vector of an Allreduce, this rank's block of a
// ReduceScatter, which an in-place call leaves at the start of out).
func (c *Comm) runWide(r *Request, cl call, a Args, result int, wide ops.Type) error {
	kernel, err := a.Op.kernel(cl.name, wide)
	if err != nil {
		return err
	}
	if cl.onDevice() {
		arg := "recvbuf"
		if !cl.out.onDevice() {
			arg = "sendbuf"
		}
		return argError(cl.name, mpierr.Type, "%s is CUDA device memory: GOCOLL_REPRODUCIBLE=1 on %s there is not supported yet (reduce it in float32, or on host memory)", arg, a.Type)
	}
	in, out := cl.in.bytes(), cl.out.bytes()
	win := make([]byte, 2*len(in))
	wout := make([]byte, 2*len(out))
	cl.p.InPlace = false // the float32 copies do not overlap
	cl.in, cl.out, cl.bytes, cl.force = hostBuffer(win), hostBuffer(wout), int64(len(win)), a.Algorithm
	cl.size, cl.kernel, cl.builtin = 2*cl.size, kernel, builtinOp{a.Op.Builtin, wide}
	cl.pre = func() { ops.Widen(a.Type, win, in) }
	cl.post = func() { ops.Narrow(a.Type, out[:result], wout[:2*result]) }
	return c.dispatch(r, &cl)
}
