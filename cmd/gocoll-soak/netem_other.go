//go:build !linux

package main

import (
	"errors"
	"time"
)

func serveQueue(queue int, delay, jitter time.Duration, reorder float64) error {
	return errors.New("the netem queue needs Linux (NFQUEUE)")
}
