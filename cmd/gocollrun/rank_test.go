package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestShellQuote(t *testing.T) {
	words := []string{"plain", "", "two words", "it's", `back\slash`, "$HOME", "a\nb", "*", "k=v,w"}
	var script strings.Builder
	script.WriteString("printf '%s|'")
	for _, w := range words {
		script.WriteString(" " + shellQuote(w))
	}
	out, err := exec.Command("sh", "-c", script.String()).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), strings.Join(words, "|")+"|"; got != want {
		t.Errorf("sh saw %q, want %q", got, want)
	}
}

func TestRankEnv(t *testing.T) {
	env := rankEnv(
		[]string{"HOME=/root", "PMI_FD=9", "PMI_PORT=x:1", "GOCOLL_HOST=old", "GOCOLL_DEBUG=info"},
		map[string]string{"PMI_RANK": "1", "GOCOLL_HOST": "h1"})
	want := []string{"HOME=/root", "GOCOLL_DEBUG=info", "GOCOLL_HOST=h1", "PMI_RANK=1"}
	if !slices.Equal(env, want) {
		t.Errorf("rankEnv = %v, want %v", env, want)
	}
}

func TestRemoteArgv(t *testing.T) {
	argv, viaStdin, err := remoteArgv("ip netns exec %h", "ns1", []string{"A=1"}, []string{"prog", "x y"})
	if err != nil || viaStdin || !slices.Equal(argv, []string{"ip", "netns", "exec", "ns1", "prog", "x y"}) {
		t.Errorf("exec-style launcher: %q %v %v", argv, viaStdin, err)
	}
	argv, viaStdin, err = remoteArgv("/usr/bin/ssh -o BatchMode=yes %h", "node7",
		[]string{"A=it's", "GOCOLL_JOB_SECRET=s3cr3t", "SSH_AUTH_SOCK=/tmp/x", "PWD=/here"}, []string{"prog", "x y"})
	if err != nil || !viaStdin || len(argv) != 5 || argv[3] != "node7" {
		t.Fatalf("ssh launcher: %q %v %v", argv, viaStdin, err)
	}
	script := argv[4]
	for _, want := range []string{"read -r GOCOLL_JOB_SECRET", `'A=it'\''s'`, "prog 'x y'"} {
		if !strings.Contains(script, want) {
			t.Errorf("ssh script %q lacks %q", script, want)
		}
	}
	for _, bad := range []string{"s3cr3t", "SSH_AUTH_SOCK", "PWD="} {
		if strings.Contains(script, bad) {
			t.Errorf("ssh script %q contains %q", script, bad)
		}
	}
	if _, _, err := remoteArgv("  ", "h", nil, []string{"prog"}); err == nil {
		t.Error("an empty launcher was accepted")
	}
}
