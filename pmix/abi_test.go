package pmix

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pmixInclude finds the directory of the real pmix.h: pkg-config's, then
// the usual places (Debian keeps it under pmix2/include).
func pmixInclude() string {
	if out, err := exec.Command("pkg-config", "--cflags-only-I", "pmix").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if dir := strings.TrimPrefix(f, "-I"); fileExists(filepath.Join(dir, "pmix.h")) {
				return dir
			}
		}
	}
	for _, dir := range []string{"/usr/include", "/usr/lib/x86_64-linux-gnu/pmix2/include", "/usr/lib/aarch64-linux-gnu/pmix2/include", "/usr/local/include"} {
		if fileExists(filepath.Join(dir, "pmix.h")) {
			return dir
		}
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestABI compiles testdata/abi.c against the real pmix.h, where
// libpmix-dev is installed, and runs it: pmix_abi.h's sizes, offsets and
// constants must be PMIx's.
func TestABI(t *testing.T) {
	inc := pmixInclude()
	if inc == "" {
		t.Skip("pmix.h is not installed (apt-get install libpmix-dev): nothing to compare pmix_abi.h with")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	bin := filepath.Join(t.TempDir(), "abi")
	out, err := exec.Command(cc, "-std=gnu11", "-Wall", "-I", inc, "-I", ".", "-o", bin, "testdata/abi.c").CombinedOutput()
	if err != nil {
		t.Fatalf("compiling testdata/abi.c against %s/pmix.h: %v\n%s", inc, err, out)
	}
	out, err = exec.Command(bin).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ABI OK" {
		t.Fatalf("pmix_abi.h differs from %s/pmix.h (%v):\n%s", inc, err, out)
	}
}
