package tests

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// TestLoadingWaitsForGo checks that a process loading libgocoll.so or
// libgocoll-preload.so begins main only once the library's Go runtime and
// package inits have run (internal/loadwait). Before, they ran beside
// main, and their opening and closing of files took the descriptor a
// shell had just closed to reuse: a preload test rank's standard error
// was lost that way, about once in 150 runs. GODEBUG=inittrace=1 prints
// a line per package init, the library's own package last ("init main
// @"); the program prints "main" first thing. Without the wait, main came
// first in 20 runs of 20.
func TestLoadingWaitsForGo(t *testing.T) {
	prog := harness.Compile(t, "gcc", "mainfirst", nil, "tests/c/mainfirst.c")
	for _, lib := range []string{"libgocoll.so", "libgocoll-preload.so"} {
		path := filepath.Join(harness.Root, "build", "lib", lib)
		for i := range 10 {
			out, code := run(t, time.Minute, []string{"LD_PRELOAD=" + path, "GODEBUG=inittrace=1"}, prog)
			if code != 0 {
				t.Fatalf("%s, run %d: exit status %d\n%s", lib, i, code, out)
			}
			lines := strings.Split(out, "\n")
			mainAt, initAt := -1, -1
			for n, l := range lines {
				switch {
				case l == "main" && mainAt < 0:
					mainAt = n
				case strings.HasPrefix(l, "init main @"):
					initAt = n
				}
			}
			if mainAt < 0 || initAt < 0 || initAt > mainAt {
				t.Fatalf("%s, run %d: the library's last init (line %d) is not before the program's first line (line %d):\n%s", lib, i, initAt, mainAt, out)
			}
		}
	}
}
