package main

import (
	"fmt"
	gocollversion "github.com/gocoll/gocoll/internal/version"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/topology"
)

// printInfo writes the GOCOLL_ variables and a line about this build.
func printInfo(w io.Writer) {
	envvar.Print(w) // hides GOCOLL_JOB_SECRET's value

	fmt.Fprintln(w)
	// GOCOLL_CUDA, the driver, the GPUs (NVML). An invalid setting, CUDA's
	// or not, is reported instead, as MPI_Init would fail on it.
	if s, err := envvar.Parse(os.Getenv); err != nil {
		fmt.Fprintf(w, "CUDA: %v\n", err)
	} else {
		mode := map[envvar.CUDAMode]gpu.Mode{envvar.CUDAAuto: gpu.Auto, envvar.CUDAOff: gpu.Off, envvar.CUDAOn: gpu.On}[s.CUDA]
		topology.Describe(w, mode, s.CUDANoIPC)
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, buildLine())
}

// buildLine names the module version, VCS revision and Go toolchain.
func buildLine() string {
	version, rev, dirty := "(devel)", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		rev = " revision " + rev + dirty
	}
	return fmt.Sprintf("gocollrun (gocoll %s), module %s%s, built with %s for %s/%s, PMI-1 server",
		gocollversion.Version, version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
