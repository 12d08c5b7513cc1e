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

func TestProxyArgv(t *testing.T) {
	words := []string{"/opt/x y/gocollrun", "--proxy", "h0:99", "1"}
	argv, err := proxyArgv("ip netns exec %h", "ns1", words)
	if want := []string{"ip", "netns", "exec", "ns1", "/opt/x y/gocollrun", "--proxy", "h0:99", "1"}; err != nil || !slices.Equal(argv, want) {
		t.Errorf("exec-style launcher: %q %v; want %q", argv, err, want)
	}
	// ssh joins its arguments for the remote shell: they are quoted.
	argv, err = proxyArgv("/usr/bin/ssh -o BatchMode=yes %h", "node7", words)
	if want := []string{"/usr/bin/ssh", "-o", "BatchMode=yes", "node7", "'/opt/x y/gocollrun'", "--proxy", "h0:99", "1"}; err != nil || !slices.Equal(argv, want) {
		t.Errorf("ssh launcher: %q %v; want %q", argv, err, want)
	}
	if _, err := proxyArgv("  ", "h", words); err == nil {
		t.Error("an empty launcher was accepted")
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"HOME=/r", "PATH=/bin", "FAKE=1"}, []string{"PATH=/usr/bin", "X=y"})
	if want := []string{"HOME=/r", "FAKE=1", "PATH=/usr/bin", "X=y"}; !slices.Equal(got, want) {
		t.Errorf("mergeEnv = %v, want %v", got, want)
	}
}
