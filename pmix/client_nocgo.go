//go:build !cgo

package pmix

import (
	"errors"

	"github.com/gocoll/gocoll/bootstrap"
)

// Client is unusable without cgo: Init always fails.
type Client struct{ bootstrap.Launcher }

// Init fails: without cgo there is no dlopen, so no PMIx.
func Init() (*Client, error) {
	return nil, errors.New("pmix: gocoll was built without cgo, so it cannot load libpmix.so.2")
}

// Nodes is never reached (Init fails).
func (c *Client) Nodes() ([]int, error) { return nil, errors.New("pmix: built without cgo") }
