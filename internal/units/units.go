// Package units parses the message sizes the commands take on their
// command lines (gocoll-bench -b/-e, gocoll-tune -min/-max).
package units

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseBytes reads a byte count with an optional K, M or G suffix
// (binary: 1K = 1024).
func ParseBytes(s string) (int64, error) {
	num, mult := s, int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		num, mult = strings.TrimSuffix(s, "K"), 1<<10
	case strings.HasSuffix(s, "M"):
		num, mult = strings.TrimSuffix(s, "M"), 1<<20
	case strings.HasSuffix(s, "G"):
		num, mult = strings.TrimSuffix(s, "G"), 1<<30
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q", num)
	}
	return n * mult, nil
}
