package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// gocoll-soak -matrix exits 1 when it could not run a configuration, even
// where every configuration it ran passed, and says which and why in its
// table: here the emulated hosts, with an `ip` that cannot make network
// namespaces first on PATH (as on a machine without the rights or the
// tools), and a configuration it does not know. The shm configuration
// beside them runs and passes, so that the exit status is the unrun
// configurations' doing.
func TestMatrixExitsOneOnConfigurationsNotRun(t *testing.T) {
	dir := t.TempDir()
	for _, pkg := range []string{".", "../gocollrun"} {
		if out, err := exec.Command("go", "build", "-o", dir+"/", pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	stubs := t.TempDir()
	if err := os.WriteFile(filepath.Join(stubs, "ip"), []byte("#!/bin/sh\necho \"ip: Operation not permitted (stand-in)\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		configs string
		want    []string
	}{
		{"shm,netns,netns-faults", []string{
			`(?m)^gocoll-soak: shm +p=2: \d+ calls, .*, 0 failures, [^ ]+$`,
			`(?m)^ *netns +- .*not run: ip netns add .*Operation not permitted \(stand-in\)`,
			`(?m)^ *netns-faults +- .*not run: ip netns add .*Operation not permitted \(stand-in\)`,
			`(?m)^total: 3 runs, \d+ calls, 0 failures`,
		}},
		{"bogus", []string{`(?m)^ *bogus +- .*not run: no such configuration`}},
	} {
		cmd := exec.Command(filepath.Join(dir, "gocoll-soak"), "-matrix", "-configs", tc.configs, "-ranks", "2", "-iters", "3")
		cmd.Env = append(os.Environ(), "PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		failed := code != 1
		if failed {
			t.Errorf("-configs %s: exit %d, want 1", tc.configs, code)
		}
		for _, want := range tc.want {
			if !regexp.MustCompile(want).Match(out) {
				t.Errorf("-configs %s: no line matching %q", tc.configs, want)
				failed = true
			}
		}
		if failed {
			t.Logf("output:\n%s", out)
		}
	}
}
