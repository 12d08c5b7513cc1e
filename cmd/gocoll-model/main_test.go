package main

import (
	"io"
	"regexp"
	"strings"
	"testing"
)

// The built-in tuner (measured rules where they were measured, the model
// beyond) is within 10% of the model's best on the reduced grid, on all
// three machines: the regret table's claim, cheap enough for go test.
func TestRegret(t *testing.T) {
	worst, err := Regret(io.Discard, Quick, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("max regret %.3f at %s (%d points)", worst.Ratio, worst, worst.Points)
	if worst.Points < 1000 {
		t.Errorf("only %d points", worst.Points)
	}
	if worst.Ratio > 1.10 {
		t.Errorf("max regret %.3f at %s, want <= 1.10", worst.Ratio, worst)
	}
}

// The table names the machines' parameters and every point above 1, and
// says where the hierarchical algorithm is the tuner's choice: on 8 nodes
// of 8 ranks it is somewhere (allgather on the slow network, say).
func TestRegretOutput(t *testing.T) {
	var b strings.Builder
	g := Quick
	g.Ps = []int{64}
	if _, err := Regret(&b, g, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"default", "slow", "fast", "Alpha:3e-05", "model's best", "allgather"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out[:min(len(out), 2000)])
		}
	}
	if m := regexp.MustCompile(`hierarchical on slow: the tuner's choice at (\d+) points`).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Errorf("hierarchical never the tuner's choice on the slow machine: %q", m)
	}
}
