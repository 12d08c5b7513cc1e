package tests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// make install into a temporary prefix, then, from a folder outside the
// repository: a C example built with the installed mpicc and with
// pkg-config gocoll runs under the installed gocollrun; so do CMake
// projects with find_package(gocoll) (gocoll::mpi, and gocoll::preload
// linked ahead of Open MPI's library; TestLinkTime links with pkg-config
// gocoll-preload over both hosts, from C, C++ and Fortran); make
// uninstall leaves the prefix empty. DESTDIR stages an install whose files name the final prefix.
func TestInstall(t *testing.T) {
	tmp := t.TempDir()
	prefix := filepath.Join(tmp, "prefix")
	install := filepath.Join(harness.Root, "tools", "install.sh")
	mustRun(t, []string{"PREFIX=" + prefix}, install, "install")
	checkInstalledLayout(t, prefix)
	src := filepath.Join(prefix, "share", "doc", "gocoll", "examples", "allreduce.c")
	away := filepath.Join(tmp, "app") // not in the repository
	if err := os.Mkdir(away, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := func(name string) string { return filepath.Join(prefix, "bin", name) }
	pcEnv := []string{"PKG_CONFIG_PATH=" + filepath.Join(prefix, "lib", "pkgconfig")}
	pkgConfig := func(args ...string) []string {
		return strings.Fields(mustRun(t, pcEnv, append([]string{"pkg-config"}, args...)...))
	}

	wrapped := filepath.Join(away, "allreduce-mpicc")
	mustRun(t, nil, bin("mpicc"), "-o", wrapped, src) // mpicc -> mpicc.gocoll
	pc := filepath.Join(away, "allreduce-pc")
	mustRun(t, nil, append([]string{"cc", "-o", pc, src}, pkgConfig("--cflags", "--libs", "gocoll")...)...)
	for _, prog := range []string{wrapped, pc} {
		out, code := harness.Run(t, time.Minute, nil, bin("gocollrun"), "-n", "2", prog)
		if code != 0 || strings.Count(out, ": PASS") != 2 || strings.Contains(out, filepath.Join(harness.Root, "build")) {
			t.Errorf("%s under the installed gocollrun: exit %d\n%s", filepath.Base(prog), code, out)
		}
		if ldd, _ := harness.Run(t, time.Minute, nil, "ldd", prog); !strings.Contains(ldd, "libgocoll.so.0 => "+filepath.Join(prefix, "lib", "libgocoll.so.0")) {
			t.Errorf("%s does not load the installed libgocoll.so:\n%s", filepath.Base(prog), ldd)
		}
	}

	// Linked ahead of a host MPI's library: the programs, hosts and link
	// lines are linktime_test.go's; here only the .pc's promise.
	if cflags := pkgConfig("--cflags", "gocoll-preload"); len(cflags) != 0 {
		t.Errorf("gocoll-preload.pc has cflags %v: a host MPI program must keep its own mpi.h", cflags)
	}

	// CMake: find_package(gocoll), gocoll::mpi for a standalone program,
	// gocoll::preload ahead of Open MPI's library (built with its mpicc);
	// kept by a program that calls none of its names (barrier.c) with
	// the link option docs/preload.md gives for it.
	proj := filepath.Join(away, "cmake")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	barrier := "#include <mpi.h>\nint main(int argc, char **argv) { MPI_Init(&argc, &argv); MPI_Barrier(MPI_COMM_WORLD); return MPI_Finalize(); }\n"
	if err := os.WriteFile(filepath.Join(proj, "barrier.c"), []byte(barrier), 0o644); err != nil {
		t.Fatal(err)
	}
	lists := `cmake_minimum_required(VERSION 3.16)
project(app C)
find_package(gocoll 0.1 REQUIRED)
add_executable(app ` + src + `)
target_link_libraries(app gocoll::mpi)
if(LINKED)
  add_executable(linked ` + src + `)
  target_link_libraries(linked gocoll::preload mpi)
  add_executable(barrier barrier.c)
  target_link_options(barrier PRIVATE "LINKER:--no-as-needed")
  target_link_libraries(barrier gocoll::preload mpi)
endif()
`
	if err := os.WriteFile(filepath.Join(proj, "CMakeLists.txt"), []byte(lists), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, cc, flag string }{{"std", "cc", "-DLINKED=OFF"}, {"ompi", "mpicc.openmpi", "-DLINKED=ON"}} {
		b := filepath.Join(away, "cmake-"+tc.dir)
		if out, code := harness.Run(t, 2*time.Minute, []string{"CC=" + tc.cc}, "cmake", "-S", proj, "-B", b, "-DCMAKE_PREFIX_PATH="+prefix, tc.flag); code != 0 {
			t.Fatalf("cmake configure (%s): exit %d\n%s", tc.dir, code, out)
		}
		if out, code := harness.Run(t, 2*time.Minute, nil, "cmake", "--build", b); code != 0 {
			t.Fatalf("cmake --build (%s): exit %d\n%s", tc.dir, code, out)
		}
	}
	if out, code := harness.Run(t, time.Minute, nil, bin("gocollrun"), "-n", "2", filepath.Join(away, "cmake-std", "app")); code != 0 || strings.Count(out, ": PASS") != 2 {
		t.Errorf("the CMake-built gocoll::mpi program: exit %d\n%s", code, out)
	}
	out, code := harness.Run(t, 2*time.Minute, ompiRoot,
		"mpirun.openmpi", "-np", "2", "-x", "GOCOLL_DEBUG=info", "-x", "GOCOLL_ALLREDUCE_ALGORITHM=ring", filepath.Join(away, "cmake-ompi", "linked"))
	if code != 0 || strings.Count(out, ": PASS") != 2 || !strings.Contains(out, "algorithm=ring") {
		t.Errorf("the CMake-built gocoll::preload program over Open MPI: exit %d\n%s", code, out)
	}

	if libs := needed(t, filepath.Join(away, "cmake-ompi", "barrier")); !slices.Contains(libs, preloadSoname) {
		t.Errorf("gocoll::preload dropped, with LINKER:--no-as-needed, from a program calling none of its names: needs %v", libs)
	}

	mustRun(t, []string{"PREFIX=" + prefix}, install, "uninstall")
	if left, _ := harness.Run(t, time.Minute, nil, "find", prefix, "-mindepth", "1"); left != "" {
		t.Errorf("uninstall left files behind:\n%s", left)
	}

	// DESTDIR: staged under it, naming the final prefix.
	stage := filepath.Join(tmp, "stage")
	mustRun(t, []string{"DESTDIR=" + stage, "PREFIX=/opt/gocoll"}, install, "install")
	pcFile, err := os.ReadFile(filepath.Join(stage, "opt", "gocoll", "lib", "pkgconfig", "gocoll.pc"))
	if err != nil || !strings.Contains(string(pcFile), "prefix=/opt/gocoll\n") {
		t.Errorf("staged gocoll.pc (%v):\n%s", err, pcFile)
	}
}
