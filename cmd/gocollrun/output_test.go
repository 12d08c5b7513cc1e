package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCopyLines(t *testing.T) {
	long := strings.Repeat("y", 40)
	for _, tc := range []struct {
		name, in, prefix, want string
	}{
		{"unchanged", "a\nb\nend", "", "a\nb\nend"},
		{"tagged", "a\nb\nend", "[3] ", "[3] a\n[3] b\n[3] end\n"},
		{"empty", "", "[3] ", ""},
		// A line longer than the buffer goes out in pieces, tagged once.
		{"long", "x\n" + long + "\nz\n", "[1] ", "[1] x\n[1] " + long + "\n[1] z\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &output{bufLen: 16}
			var dst bytes.Buffer
			o.copyLines(strings.NewReader(tc.in), &dst, tc.prefix)
			if dst.String() != tc.want {
				t.Errorf("got %q, want %q", dst.String(), tc.want)
			}
		})
	}
}
