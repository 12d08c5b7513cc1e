package tests

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// gocollVersion is the VERSION file's version and its first number (the
// sonames').
func gocollVersion(t *testing.T) (version, major string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.Root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version = strings.TrimSpace(string(b))
	major, _, _ = strings.Cut(version, ".")
	return version, major
}

// checkInstalledLayout checks what make install put in prefix beyond
// what TestInstall runs: each library as file, soname and .so link, the
// soname in the file; the wrappers as mpicc.gocoll with mpicc linking to
// it (outside /usr); the headers in include/gocoll; every command's
// --help (exit 0, "NAME - summary"), --version (the VERSION file's) and
// its man page, which man renders.
func checkInstalledLayout(t *testing.T, prefix string) {
	t.Helper()
	v, major := gocollVersion(t)
	lib := filepath.Join(prefix, "lib")
	for _, n := range []string{"libgocoll", "libgocoll-preload"} {
		soname := n + ".so." + major
		for link, want := range map[string]string{n + ".so": soname, soname: n + ".so." + v} {
			if got, err := os.Readlink(filepath.Join(lib, link)); err != nil || got != want {
				t.Errorf("lib/%s links to %q (%v), want %s", link, got, err, want)
			}
		}
		f, err := elf.Open(filepath.Join(lib, n+".so."+v))
		if err != nil {
			t.Errorf("lib/%s.so.%s: %v", n, v, err)
			continue
		}
		got, _ := f.DynString(elf.DT_SONAME)
		f.Close()
		if len(got) != 1 || got[0] != soname {
			t.Errorf("lib/%s.so.%s has soname %v, want %s", n, v, got, soname)
		}
	}
	if got, err := os.Readlink(filepath.Join(lib, "mpich-abi", "libmpich.so.12")); err != nil || got != "../libgocoll.so."+major {
		t.Errorf("lib/mpich-abi/libmpich.so.12 links to %q (%v), want ../libgocoll.so.%s", got, err, major)
	}

	for _, w := range []string{"mpicc", "mpicxx", "mpif90"} {
		if got, err := os.Readlink(filepath.Join(prefix, "bin", w)); err != nil || got != w+".gocoll" {
			t.Errorf("bin/%s links to %q (%v), want %s.gocoll", w, got, err, w)
		}
	}
	for _, h := range []string{"mpi.h", "mpi-ext.h", "mpif.h", "mpi.mod"} {
		if _, err := os.Stat(filepath.Join(prefix, "include", "gocoll", h)); err != nil {
			t.Errorf("include/gocoll/%s: %v", h, err)
		}
	}

	// The modulefile, as a site's module tree uses it: a link to it
	// there (Environment Modules; Lmod reads the same Tcl).
	site := filepath.Join(t.TempDir(), "modulefiles")
	if err := os.MkdirAll(filepath.Join(site, "gocoll"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(prefix, "share", "modulefiles", "gocoll", v), filepath.Join(site, "gocoll", v)); err != nil {
		t.Fatal(err)
	}
	script := `. /usr/share/modules/init/sh && module use "$2" && module load gocoll &&
command -v mpicc.gocoll && pkg-config --modversion gocoll && echo "$CMAKE_PREFIX_PATH" && echo "$MANPATH"`
	out, code := harness.Run(t, time.Minute, []string{"MANPATH=", "CMAKE_PREFIX_PATH=", "PKG_CONFIG_PATH="}, "sh", "-c", script, "sh", prefix, site)
	if want := filepath.Join(prefix, "bin", "mpicc.gocoll") + "\n" + v + "\n" + prefix + "\n" + filepath.Join(prefix, "share", "man") + ":\n"; code != 0 || out != want {
		t.Errorf("module load gocoll: exit %d\n%s\nwant\n%s", code, out, want)
	}

	cmds, err := os.ReadDir(filepath.Join(prefix, "bin"))
	if err != nil || len(cmds) < 8 {
		t.Fatalf("bin/: %d commands (%v)", len(cmds), err)
	}
	for _, c := range cmds {
		name := c.Name()
		out, code := harness.Run(t, time.Minute, nil, filepath.Join(prefix, "bin", name), "--help")
		if code != 0 || !strings.HasPrefix(out, name+" - ") || !strings.Contains(out, "\nusage: ") {
			t.Errorf("%s --help: exit %d, want 0 and \"%s - summary\", then usage:\n%s", name, code, name, out)
		}
		if !strings.HasPrefix(name, "mpi") { // the wrappers pass --version to the compiler
			want := name + " (gocoll " + v + ")\n"
			if out, code := harness.Run(t, time.Minute, nil, filepath.Join(prefix, "bin", name), "--version"); code != 0 || out != want {
				t.Errorf("%s --version: exit %d, %q, want %q", name, code, out, want)
			}
		}
		page := filepath.Join(prefix, "share", "man", "man1", name+".1")
		out, code = harness.Run(t, time.Minute, []string{"MANWIDTH=80"}, "man", "-l", page)
		if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "SYNOPSIS") || !strings.Contains(out, name) {
			t.Errorf("man -l %s: exit %d\n%s", page, code, out)
		}
	}
}
