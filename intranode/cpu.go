package intranode

import (
	"os"
	"runtime"

	"github.com/gocoll/gocoll/internal/linuxsys"
)

// numCPU is the number of CPUs a node's ranks share, against which a
// group of ranks is crowded (more ranks than CPUs: a waiting rank gives
// its core away at once). It is the CPUs this process may run on or,
// if more, those its parent may: the launcher's daemon (orted, hydra's
// proxy, slurmstepd, a shell), which binding policies leave unpinned.
// So two ranks Open MPI pins to a core each are not crowded (each had 1
// CPU, and yielded on every wait for nothing: 0.1 µs more per small
// call), while ranks pinned together, as by taskset around the
// launcher, or in a container's cpuset, still are.
func numCPU() int { return max(runtime.NumCPU(), linuxsys.CPUsOf(os.Getppid())) }
