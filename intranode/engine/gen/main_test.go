package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The committed engine_gen.h is what the generator writes from today's Go
// constants: regenerate it (go run, as go generate does) into a temporary
// folder and compare. A hand edit of the header, or a change of a
// constant in Go without regenerating, fails here.
func TestHeaderIsGenerated(t *testing.T) {
	out := filepath.Join(t.TempDir(), "engine_gen.h")
	cmd := exec.Command("go", "run", ".", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../engine_gen.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("intranode/engine/engine_gen.h differs from what the generator writes (first difference at byte %d); "+
			"run go generate ./intranode/engine and commit the result", firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
