package units

import "testing"

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"8": 8, "4K": 4 << 10, "16M": 16 << 20, "2G": 2 << 30, "0": 0} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "K", "1.5M", "12k", "lots"} {
		if _, err := ParseBytes(s); err == nil {
			t.Errorf("ParseBytes(%q) accepted", s)
		}
	}
}
