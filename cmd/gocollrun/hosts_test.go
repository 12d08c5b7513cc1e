package main

import (
	"slices"
	"strings"
	"testing"
)

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		spec string
		n    int
		want string // hosts of ranks 0..n-1, or "error"
	}{
		{"", 3, "localhost localhost localhost"},
		{"h1,h2", 4, "h1 h1 h2 h2"},
		{"h1,h2", 5, "h1 h1 h1 h2 h2"},
		{"h1,h2,h3", 2, "h1 h2"},
		{"h1:2,h2:2", 4, "h1 h1 h2 h2"},
		{"h1:2,h2:2", 3, "h1 h1 h2"},
		{"h1:3,h2", 4, "h1 h1 h1 h2"},
		{"localhost:1,fake:2", 3, "localhost fake fake"},
		{"h1:2,h2:2", 5, "error"},
		{"h1,,h2", 2, "error"},
		{"h1:x", 1, "error"},
		{"h1:0", 1, "error"},
		{":2", 1, "error"},
	} {
		got, err := place(tc.spec, tc.n)
		if tc.want == "error" {
			if err == nil {
				t.Errorf("place(%q, %d) = %v, want an error", tc.spec, tc.n, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, strings.Fields(tc.want)) {
			t.Errorf("place(%q, %d) = %v, %v; want %s", tc.spec, tc.n, got, err, tc.want)
		}
	}
}
