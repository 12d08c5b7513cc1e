package cmdhelp

import (
	"bytes"
	"flag"
	"testing"
)

func TestWrite(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("n", 2, "ranks")
	var b bytes.Buffer
	Help{Name: "gocoll-x", Summary: "does x", Usage: []string{"gocoll-x [flags]", "gocoll-x --info"}, About: "Does x.\n"}.Write(&b, fs)
	want := "gocoll-x - does x\n\nusage: gocoll-x [flags]\n       gocoll-x --info\n\nDoes x.\n\nflags:\n  -n int\n    \tranks (default 2)\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	Help{Name: "w", Summary: "s", Usage: []string{"w"}}.Write(&b, flag.NewFlagSet("w", flag.ContinueOnError))
	if b.String() != "w - s\n\nusage: w\n" {
		t.Errorf("no about, no flags: got %q", b.String())
	}
}

func TestAsked(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("n", 2, "ranks")
	fs.Bool("v", false, "verbose")
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--help"}, true},
		{[]string{"-n", "2", "-h"}, true},
		{[]string{"-v", "prog", "--help"}, false}, // the program's own flag
		{[]string{"--", "-h"}, false},
		{[]string{"-n", "-h"}, false}, // -h is -n's value
		{[]string{"-n=3", "-v", "--help"}, true},
		{nil, false},
	} {
		if got := Asked(fs, tc.args); got != tc.want {
			t.Errorf("Asked(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
