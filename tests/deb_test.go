package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// make deb (tools/deb.sh): the package depends on libc6 and on no MPI or
// CUDA; its files are the install layout (tools/install.sh with
// PREFIX=/usr); installed with dpkg into a scratch root, its files are
// the staged ones byte for byte, and its mpicc and gocollrun build and
// run a C example from a folder outside the repository; removed, it
// leaves nothing behind.
func TestDeb(t *testing.T) {
	tmp := t.TempDir()
	arch := strings.TrimSpace(mustRun(t, nil, "dpkg", "--print-architecture"))
	v, major := gocollVersion(t)
	deb := filepath.Join(tmp, "gocoll.deb") // not build/'s
	// gzip -1: the same files as make deb's xz, written in 3 s, not 30.
	mustRun(t, []string{"DPKG_DEB_COMPRESSOR_TYPE=gzip", "DPKG_DEB_COMPRESSOR_LEVEL=1"},
		filepath.Join(harness.Root, "tools", "deb.sh"), deb)

	// (a) The control fields.
	fields := map[string]string{}
	for _, f := range []string{"Package", "Version", "Architecture", "Depends"} {
		fields[f] = strings.TrimSpace(mustRun(t, nil, "dpkg-deb", "-f", deb, f))
	}
	want := map[string]string{"Package": "gocoll", "Version": v, "Architecture": arch}
	for f, v := range want {
		if fields[f] != v {
			t.Errorf("%s: %q, want %q", f, fields[f], v)
		}
	}
	depends := fields["Depends"]
	if !strings.Contains(depends, "libc6") {
		t.Errorf("Depends: %q, want libc6 in it", depends)
	}
	for _, bad := range []string{"mpi", "mpich", "cuda", "nvidia"} { // "mpi" covers openmpi and libmpi*
		if strings.Contains(strings.ToLower(depends), bad) {
			t.Errorf("Depends: %q names %s: gocoll needs no MPI or CUDA to be installed", depends, bad)
		}
	}

	// Its libraries' sonames, for packages built against it; ldconfig
	// run after it installs.
	ctrl := filepath.Join(tmp, "control")
	mustRun(t, nil, "dpkg-deb", "-e", deb, ctrl)
	for file, want := range map[string]string{
		"shlibs":   "libgocoll " + major + " gocoll (>= " + v + ")\nlibgocoll-preload " + major + " gocoll (>= " + v + ")\n",
		"triggers": "activate-noawait ldconfig\n",
	} {
		if got, err := os.ReadFile(filepath.Join(ctrl, file)); err != nil || string(got) != want {
			t.Errorf("DEBIAN/%s: %q (%v), want %q", file, got, err, want)
		}
	}

	// (b) Its files are what install.sh stages for /usr.
	stage := filepath.Join(tmp, "stage")
	mustRun(t, []string{"DESTDIR=" + stage, "PREFIX=/usr"}, filepath.Join(harness.Root, "tools", "install.sh"), "install")
	staged := tree(t, stage, "usr")
	listed := debContents(t, mustRun(t, nil, "dpkg-deb", "-c", deb))
	sameTree(t, "dpkg-deb -c", listed, "the install staging", withoutSums(staged))

	// (c) Installed with dpkg into a scratch root. Its database holds the
	// host's libc6 entry (the libc the installed programs run with: the
	// scratch root has none of its own), so dpkg checks Depends for real,
	// without --force-depends: a dependency on anything else fails here.
	// The package has no maintainer scripts, which dpkg would run chrooted.
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, not passed: dpkg -i into a scratch root needs root")
	}
	root := filepath.Join(tmp, "root")
	admin := filepath.Join(root, "var", "lib", "dpkg")
	for _, d := range []string{"info", "updates"} {
		if err := os.MkdirAll(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	libc6 := mustRun(t, nil, "dpkg-query", "-s", "libc6:"+arch)
	if err := os.WriteFile(filepath.Join(admin, "status"), []byte(libc6), 0o644); err != nil {
		t.Fatal(err)
	}
	// libc6's (empty) file list, which dpkg warns about when missing.
	if err := os.WriteFile(filepath.Join(admin, "info", "libc6:"+arch+".list"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// --log: not the host's /var/log/dpkg.log. --path-include: a host's
	// dpkg.cfg.d may leave /usr/share/doc out (Docker images do), where
	// the examples are.
	dpkg := []string{"dpkg", "--root=" + root, "--log=" + filepath.Join(tmp, "dpkg.log"), "--path-include=*"}
	mustRun(t, nil, append(dpkg, "-i", deb)...)
	sameTree(t, "the installed files", tree(t, root, "usr"), "the install staging", staged)

	// (d) From a folder outside the repository (Work), the installed
	// mpicc.gocoll and gocollrun, which find the rest from where they
	// are. In /usr, mpicc itself is the system's MPI alternative: the
	// package must not ship it.
	usr := filepath.Join(root, "usr")
	for _, w := range []string{"mpicc", "mpicxx", "mpif90"} {
		if _, err := os.Lstat(filepath.Join(usr, "bin", w)); err == nil {
			t.Errorf("the package ships /usr/bin/%s: it would replace the system's MPI alternative", w)
		}
		if _, err := os.Lstat(filepath.Join(usr, "share", "man", "man1", w+".1")); err == nil {
			t.Errorf("the package ships /usr/share/man/man1/%s.1: the system's MPI alternative's page", w)
		}
	}
	if _, err := os.Lstat(filepath.Join(usr, "include", "mpi.h")); err == nil {
		t.Errorf("the package ships /usr/include/mpi.h: host MPI programs built without their -I would find it")
	}
	prog := filepath.Join(tmp, "allreduce")
	mustRun(t, nil, filepath.Join(usr, "bin", "mpicc.gocoll"), "-o", prog, filepath.Join(usr, "share", "doc", "gocoll", "examples", "allreduce.c"))
	out, code := harness.Run(t, time.Minute, nil, filepath.Join(usr, "bin", "gocollrun"), "-n", "2", prog)
	if code != 0 || strings.Count(out, ": PASS") != 2 {
		t.Errorf("the example under the package's gocollrun: exit %d, want two PASS lines\n%s", code, out)
	}
	if ldd := mustRun(t, nil, "ldd", prog); !strings.Contains(ldd, filepath.Join(usr, "lib", "libgocoll.so")) {
		t.Errorf("the example does not load the package's libgocoll.so:\n%s", ldd)
	}

	// (e) Purged, it leaves nothing in /usr.
	mustRun(t, nil, append(dpkg, "--purge", "gocoll")...)
	if left := tree(t, root, "usr"); len(left) != 0 {
		t.Errorf("dpkg --purge gocoll left %s", strings.Join(slices.Sorted(maps.Keys(left)), " "))
	}
	if out, code := harness.Run(t, time.Minute, nil, "dpkg-query", "--root="+root, "-W", "gocoll"); code == 0 {
		t.Errorf("dpkg-query -W gocoll after the purge: exit 0\n%s", out)
	}
}

// mustRun is harness.Run that fails the test unless argv exits 0, and
// returns its output.
func mustRun(t *testing.T, env []string, argv ...string) string {
	t.Helper()
	out, code := harness.Run(t, time.Minute, env, argv...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", strings.Join(argv, " "), code, out)
	}
	return out
}

// debEntry is one path of a package or a folder: kind d, f or l; for a
// file its permissions, size and (from a folder) SHA-256; for a link
// its target.
type debEntry struct {
	kind      byte
	perm      string
	size      int64
	sum, link string
}

// tree is every path under root/sub (sub included), named relative to
// root; none when root/sub does not exist. Folders' permissions are
// left out: install.sh makes them under the caller's umask.
func tree(t *testing.T, root, sub string) map[string]debEntry {
	t.Helper()
	entries := map[string]debEntry{}
	err := filepath.WalkDir(filepath.Join(root, sub), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == filepath.Join(root, sub) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			entries[rel] = debEntry{kind: 'd'}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			entries[rel] = debEntry{kind: 'l', link: target}
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			entries[rel] = debEntry{kind: 'f', perm: info.Mode().Perm().String(), size: info.Size(), sum: hex.EncodeToString(sum[:])}
		default:
			entries[rel] = debEntry{kind: '?', perm: info.Mode().String()}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// withoutSums is entries without the files' SHA-256, which dpkg-deb -c
// does not show.
func withoutSums(entries map[string]debEntry) map[string]debEntry {
	out := map[string]debEntry{}
	for p, e := range entries {
		e.sum = ""
		out[p] = e
	}
	return out
}

// debContents parses dpkg-deb -c: one line per path, as
// "-rwxr-xr-x root/root 878 2026-12-03 11:12 ./usr/bin/mpicc" (and
// "... ./usr/lib/x -> target" for a link); ./ itself left out.
func debContents(t *testing.T, out string) map[string]debEntry {
	t.Helper()
	entries := map[string]debEntry{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || len(f[0]) != 10 {
			t.Fatalf("dpkg-deb -c: unexpected line %q", line)
		}
		p := strings.TrimSuffix(strings.TrimPrefix(f[5], "./"), "/")
		if p == "" || p == "." {
			continue
		}
		switch f[0][0] {
		case 'd':
			entries[p] = debEntry{kind: 'd'}
		case 'l':
			if len(f) != 8 || f[6] != "->" {
				t.Fatalf("dpkg-deb -c: unexpected link line %q", line)
			}
			entries[p] = debEntry{kind: 'l', link: f[7]}
		case '-':
			size, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("dpkg-deb -c: %q: %v", line, err)
			}
			entries[p] = debEntry{kind: 'f', perm: f[0], size: size}
		default:
			entries[p] = debEntry{kind: '?', perm: f[0]}
		}
	}
	return entries
}

// sameTree fails the test for every path that got and want do not have
// alike.
func sameTree(t *testing.T, gotName string, got map[string]debEntry, wantName string, want map[string]debEntry) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s: %s is missing (in %s: %+v)", gotName, p, wantName, want[p])
		case g != want[p]:
			t.Errorf("%s: %s is %+v, in %s %+v", gotName, p, g, wantName, want[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s (%+v) is not in %s", gotName, p, got[p], wantName)
		}
	}
}
