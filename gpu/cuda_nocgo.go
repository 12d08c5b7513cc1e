//go:build !cgo

package gpu

import "errors"

// Load fails: without cgo there is no dlopen, so no CUDA.
func Load() (Driver, error) {
	return nil, errors.New("gocoll was built without cgo, so it cannot load libcuda.so.1")
}
