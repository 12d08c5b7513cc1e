//go:build !cgo || !amd64

package cfloat

// Available reports whether this build has the kernels.
const Available = false

// Has reports whether there is a kernel of op on type t: never, here.
func Has(t, op int) bool { return false }

// Reduce panics: this build has no kernels.
func Reduce(t, op int, dst, a, b []byte) { panic("cfloat: kernels need cgo on amd64") }
