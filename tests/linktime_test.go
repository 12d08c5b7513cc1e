package tests

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// preloadSoname is what a program linked with -lgocoll-preload needs
// (the Makefile's soname).
const preloadSoname = "libgocoll-preload.so.0"

// linkHost is a host MPI whose compiler wrappers build the programs that
// link libgocoll-preload.so ahead of its library.
type linkHost struct {
	name, cc, cxx, fc string
	// launch is the command line that runs prog at np ranks with env.
	launch func(np int, env []string, prog string) []string
}

var linkHosts = []linkHost{
	{"openmpi", "mpicc.openmpi", "mpicxx.openmpi", "mpif90.openmpi", func(np int, env []string, prog string) []string {
		a := []string{"mpirun.openmpi", "--oversubscribe", "--mca", "btl", "self,vader", "-np", fmt.Sprint(np)}
		for _, e := range env {
			a = append(a, "-x", e)
		}
		return append(a, prog)
	}},
	{"mpich", "mpicc.mpich", "mpicxx.mpich", "mpif90.mpich", func(np int, env []string, prog string) []string {
		a := []string{"mpiexec.mpich", "-n", fmt.Sprint(np)}
		for _, e := range env {
			k, v, _ := strings.Cut(e, "=")
			a = append(a, "-genv", k, v)
		}
		return append(a, prog)
	}},
}

// linkProgram is a test program in one language: its source, the
// compiler of the host it needs (cc, cxx or fc), how many MPI_Allreduce
// calls each rank makes, and the line rank 0 (or every rank) prints when
// all is right at 2 ranks.
type linkProgram struct {
	name, lang, src string
	allreduces      int
	pass            string
	passes          int // how many times pass must appear
}

// Link-time use (no LD_PRELOAD): C, C++ and Fortran (mpif.h, `use mpi`,
// `use mpi_f08`) over Open MPI and MPICH, each built with the host's
// wrapper and `pkg-config --libs gocoll-preload` of an installed gocoll,
// run at 2 ranks with GOCOLL_DEBUG=info and the ring allreduce forced:
// right results, and gocoll's line for every MPI_Allreduce. Both hosts'
// mpif90 on Debian 12 have mpi_f08 (MPICH 4.0's calls
// mpi_allreduce_f08ts_, a name gocoll does not define: only the .pc's
// --no-as-needed keeps the library, whose MPI_Allreduce MPICH's Fortran
// library then calls).
func TestLinkTime(t *testing.T) {
	prefix, libs := installPrefix(t)
	away := t.TempDir() // outside the repository
	testdata := filepath.Join(harness.Root, "tests", "preload", "testdata")
	programs := []linkProgram{
		{"c", "cc", filepath.Join(prefix, "share", "doc", "gocoll", "examples", "allreduce.c"), 2, ": PASS", 2},
		{"cxx", "cxx", filepath.Join(harness.Root, "tests", "testdata", "linktime", "allreduce.cc"), 2, ": PASS", 2},
		{"mpif.h", "fc", filepath.Join(testdata, "fixed.f"), 2, "12 passed, 0 failed", 1},
		{"use-mpi", "fc", filepath.Join(testdata, "usempi.f90"), 4, "20 passed, 0 failed", 1},
		{"use-mpi_f08", "fc", filepath.Join(testdata, "f08.f90"), 4, "20 passed, 0 failed", 1},
	}
	type build struct {
		host linkHost
		prog linkProgram
		exe  string
		out  string
		err  error
	}
	var builds []*build
	for _, h := range linkHosts {
		if missing := missingTools(h.cc, h.cxx, h.fc, h.launch(1, nil, "x")[0]); missing != "" {
			t.Logf("%s: skipped, %s not installed", h.name, missing)
			continue
		}
		for _, p := range programs {
			builds = append(builds, &build{host: h, prog: p, exe: filepath.Join(away, h.name+"-"+p.name)})
		}
	}
	if len(builds) == 0 {
		t.Skip("neither Open MPI's nor MPICH's wrappers are installed")
	}
	// Compiling is most of the time: three at once.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 3)
	for _, b := range builds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			compiler := map[string]string{"cc": b.host.cc, "cxx": b.host.cxx, "fc": b.host.fc}[b.prog.lang]
			argv := []string{compiler, "-O1", "-o", b.exe, b.prog.src}
			if b.prog.lang == "fc" {
				argv = append(argv, "-fallow-argument-mismatch") // Open MPI's mpif.h with gfortran 12
			}
			cmd := exec.Command(argv[0], append(argv[1:], libs...)...)
			cmd.Dir, cmd.Env = away, harness.BaseEnv()
			out, err := cmd.CombinedOutput()
			b.out, b.err = string(out), err
		}()
	}
	wg.Wait()
	for _, b := range builds {
		t.Run(b.host.name+"/"+b.prog.name, func(t *testing.T) {
			if b.err != nil {
				t.Fatalf("build: %v\n%s", b.err, b.out)
			}
			if !slices.Contains(needed(t, b.exe), preloadSoname) {
				t.Errorf("%s does not need %s", b.exe, preloadSoname)
			}
			env := []string{"GOCOLL_DEBUG=info", "GOCOLL_ALLREDUCE_ALGORITHM=ring"}
			out, code := harness.Run(t, time.Minute, ompiRoot, b.host.launch(2, env, b.exe)...)
			if code != 0 || strings.Count(out, b.prog.pass) != b.prog.passes {
				t.Fatalf("exit %d, want %d lines with %q:\n%s", code, b.prog.passes, b.prog.pass, out)
			}
			if n := ringLines(out); n != 2*b.prog.allreduces {
				t.Errorf("%d lines of gocoll's forced ring allreduce, want %d (2 ranks x %d calls):\n%s", n, 2*b.prog.allreduces, b.prog.allreduces, out)
			}
		})
	}
}

// Where -lgocoll-preload stands on the link line, under --as-needed
// (gcc's default on Debian 12 and Ubuntu), over MPICH: pkg-config's flags
// keep the library even before the objects; a bare -lgocoll-preload
// there is dropped (documented: gocoll is then absent, and nothing at run
// time can tell); after the MPI library it is loaded but the host's
// MPI_Allreduce comes first, which the library reports at load instead of
// running without gocoll.
func TestLinkTimeOrder(t *testing.T) {
	if missing := missingTools("mpicc.mpich", "mpiexec.mpich"); missing != "" {
		t.Skip(missing + " not installed")
	}
	prefix, libs := installPrefix(t)
	away := t.TempDir()
	src := filepath.Join(prefix, "share", "doc", "gocoll", "examples", "allreduce.c")
	lib := filepath.Join(prefix, "lib")
	env := []string{"GOCOLL_DEBUG=info", "GOCOLL_ALLREDUCE_ALGORITHM=ring"}
	for _, tc := range []struct {
		name  string
		flags []string // around src: before, then after
		after []string
		kept  bool
		want  string // in the output of a run at 2 ranks
		fails bool
	}{
		{"pkg-config-first", append([]string{"-Wl,--as-needed"}, libs...), nil, true, "algorithm=ring", false},
		{"bare-first", []string{"-Wl,--as-needed", "-L" + lib, "-Wl,-rpath," + lib, "-lgocoll-preload"}, nil, false, ": PASS", false},
		{"after-mpich", nil, append([]string{"-lmpich"}, libs...), true, "comes before libgocoll-preload.so", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exe := filepath.Join(away, tc.name)
			argv := append(append(append([]string{"mpicc.mpich", "-o", exe}, tc.flags...), src), tc.after...)
			if out, code := harness.Run(t, time.Minute, nil, argv...); code != 0 {
				t.Fatalf("%v: exit %d\n%s", argv, code, out)
			}
			if kept := slices.Contains(needed(t, exe), preloadSoname); kept != tc.kept {
				t.Fatalf("%s needed: %v, want %v (%v)", preloadSoname, kept, tc.kept, argv)
			}
			out, code := harness.Run(t, time.Minute, nil, linkHosts[1].launch(2, env, exe)...)
			if (code != 0) != tc.fails || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want failure %v and %q:\n%s", code, tc.fails, tc.want, out)
			}
			if !tc.kept && strings.Contains(out, "gocoll:") {
				t.Errorf("gocoll ran although the linker dropped it:\n%s", out)
			}
		})
	}
}

// An executable with its MPI linked in statically (libmpich.a) keeps its
// own MPI_Allreduce, linked with libgocoll-preload.so or under LD_PRELOAD:
// the library stops the process at load naming the cause, rather than
// letting it run without gocoll; no rank hangs, none prints a result.
func TestLinkTimeStaticMPI(t *testing.T) {
	if missing := missingTools("mpicc.mpich", "mpiexec.mpich", "pkg-config"); missing != "" {
		t.Skip(missing + " not installed")
	}
	archive := "/usr/lib/x86_64-linux-gnu/libmpich.a"
	if _, err := os.Stat(archive); err != nil {
		t.Skip("no " + archive)
	}
	prefix, libs := installPrefix(t)
	away := t.TempDir()
	src := filepath.Join(prefix, "share", "doc", "gocoll", "examples", "allreduce.c")
	cflags, code := harness.Run(t, time.Minute, nil, "pkg-config", "--cflags", "mpich")
	static, code2 := harness.Run(t, time.Minute, nil, "pkg-config", "--static", "--libs", "mpich")
	if code != 0 || code2 != 0 {
		t.Fatalf("pkg-config mpich: %s %s", cflags, static)
	}
	var mpich []string
	for _, f := range strings.Fields(static) {
		if f == "-lmpich" {
			f = archive
		}
		mpich = append(mpich, f)
	}
	build := func(name string, withGocoll bool) string {
		exe := filepath.Join(away, name)
		argv := append(append([]string{"gcc", "-o", exe}, strings.Fields(cflags)...), src)
		if withGocoll {
			argv = append(argv, libs...)
		}
		argv = append(append(argv, mpich...), "-lm")
		if out, code := harness.Run(t, time.Minute, nil, argv...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", argv, code, out)
		}
		return exe
	}
	linked, plain := build("static-linked", true), build("static-plain", false)
	for _, tc := range []struct {
		name string
		exe  string
		env  []string
	}{
		{"linked", linked, nil},
		{"LD_PRELOAD", plain, []string{"LD_PRELOAD=" + filepath.Join(prefix, "lib", "libgocoll-preload.so")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := harness.Run(t, time.Minute, nil, linkHosts[1].launch(2, tc.env, tc.exe)...)
			if code == 0 || strings.Count(out, "its MPI linked in statically") != 2 || strings.Contains(out, "PASS") {
				t.Fatalf("exit %d, want a failure and each rank's error naming the static MPI, no result:\n%s", code, out)
			}
		})
	}
}

// installPrefix installs the build into a temporary prefix once per test
// and returns it with `pkg-config --libs gocoll-preload` there.
func installPrefix(t *testing.T) (string, []string) {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "prefix")
	mustRun(t, []string{"PREFIX=" + prefix}, filepath.Join(harness.Root, "tools", "install.sh"), "install")
	out := mustRun(t, []string{"PKG_CONFIG_PATH=" + filepath.Join(prefix, "lib", "pkgconfig")}, "pkg-config", "--libs", "gocoll-preload")
	return prefix, strings.Fields(out)
}

// ompiRoot lets Open MPI's mpirun run as root (MPICH ignores it).
var ompiRoot = []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}

// missingTools names the first of the commands not on PATH, or "".
func missingTools(cmds ...string) string {
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			return c
		}
	}
	return ""
}

// needed returns an executable's DT_NEEDED entries.
func needed(t *testing.T, exe string) []string {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	return libs
}

// ringLines counts gocoll's GOCOLL_DEBUG=info lines of an MPI_Allreduce it
// ran with the forced ring.
func ringLines(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "gocoll: rank ") && strings.Contains(l, " MPI_Allreduce comm=") && strings.Contains(l, "algorithm=ring (forced)") {
			n++
		}
	}
	return n
}
