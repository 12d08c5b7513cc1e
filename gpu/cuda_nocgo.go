//go:build !cgo

package gpu

import (
	"errors"
	"unsafe"
)

// Load fails: without cgo there is no dlopen, so no CUDA.
func Load() (Driver, error) {
	return nil, errors.New("gocoll was built without cgo, so it cannot load libcuda.so.1")
}

// AttrsOf has nothing to read: without cgo no C code classifies.
func AttrsOf(unsafe.Pointer) PointerAttrs { return PointerAttrs{} }
