package job

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/pmi"
	"github.com/gocoll/gocoll/pmix"
)

// findLauncher connects to the launcher that started this process: PMI-1
// or PMI-2 where PMI_FD or PMI_PORT is set (gocollrun, MPICH's hydra,
// srun --mpi=pmi2), PMIx where a PMIx server left its variables (Open
// MPI's mpirun, srun --mpi=pmix). It returns nil, and no error, only where no launcher
// did: a process whose environment shows a launcher it cannot speak to
// fails here, naming the launcher and what to do, rather than run as a
// job of one rank while its peers do the same. gocollPMI is GOCOLL_PMI's
// version (envvar.Settings.PMI; 0: the default).
func findLauncher(gocollPMI int) (bootstrap.Launcher, error) {
	if os.Getenv("PMI_FD") != "" || os.Getenv("PMI_PORT") != "" {
		c, _, err := pmi.Connect(gocollPMI)
		if err != nil {
			return nil, fmt.Errorf("started by %s, but cannot speak PMI to it: %w", pmiLauncher(), err)
		}
		return c, nil
	}
	if in, who := pmix.InEnv(); in {
		c, err := pmix.Init()
		if err != nil {
			return nil, fmt.Errorf("started by %s, but cannot speak PMIx to it: %w", who, err)
		}
		return c, nil
	}
	if who, n := launcherSign(); n > 1 {
		return nil, fmt.Errorf("started by %s as one of %d processes, but it offers this process no way to reach the others "+
			"(no PMIx, PMI-2 or PMI-1 in the environment): %s", who, n, advice(who))
	}
	return nil, nil
}

// launcherSign names a launcher that left its mark in the environment
// and the number of processes it says it started; 0 when none did.
func launcherSign() (who string, n int) {
	for _, s := range []struct{ who, size string }{
		{"Slurm's srun", "SLURM_STEP_NUM_TASKS"},
		{"Open MPI's mpirun", "OMPI_COMM_WORLD_SIZE"},
		{"MPICH's mpiexec (hydra)", "PMI_SIZE"},
		{"MVAPICH's launcher", "MV2_COMM_WORLD_SIZE"},
		{"Cray PALS", "PALS_SIZE"},
	} {
		if v := os.Getenv(s.size); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				n = 2 // unreadable: assume a real job, never a silent singleton
			}
			return fmt.Sprintf("%s (%s=%s)", s.who, s.size, v), n
		}
	}
	return "", 0
}

// pmiLauncher guesses who set PMI_FD or PMI_PORT, for messages.
func pmiLauncher() string {
	switch {
	case os.Getenv("GOCOLL_JOB_ID") != "":
		return "gocollrun"
	case os.Getenv("SLURM_STEP_ID") != "":
		return "Slurm's srun (--mpi=pmi2)"
	case os.Getenv("MPI_LOCALNRANKS") != "" || os.Getenv("HYDI_CONTROL_FD") != "":
		return "MPICH's mpiexec (hydra)"
	}
	return "a PMI launcher (PMI_FD or PMI_PORT is set)"
}

// advice says how to start the program so that gocoll can reach its
// peers.
func advice(who string) string {
	switch {
	case strings.HasPrefix(who, "Slurm"):
		return "run it with srun --mpi=pmi2 or --mpi=pmix (or set MpiDefault in slurm.conf)"
	case strings.HasPrefix(who, "Open MPI"):
		return "Open MPI's mpirun speaks PMIx: libpmix.so.2 must be loadable"
	}
	return "start it with gocollrun, MPICH's mpiexec, srun --mpi=pmi2 or --mpi=pmix, or Open MPI's mpirun"
}

// sameHost says whether the launcher knows that every rank runs on this
// host (known), and if so whether they do, so that the tcp transport's
// address can travel in the one exchange of cards where it is needed.
func sameHost(l bootstrap.Launcher) (oneHost, known bool) {
	if m, ok := l.(bootstrap.NodeMapper); ok {
		if nodes, err := m.Nodes(); err == nil {
			for _, n := range nodes {
				if n != nodes[0] {
					return false, true
				}
			}
			return true, true
		}
	}
	size := strconv.Itoa(l.Size())
	for _, v := range []struct{ hosts, local, size string }{
		{hosts: "GOCOLL_NUM_HOSTS"},     // gocollrun
		{hosts: "SLURM_STEP_NUM_NODES"}, // srun
		{local: "OMPI_COMM_WORLD_LOCAL_SIZE", size: "OMPI_COMM_WORLD_SIZE"},
		{local: "MPI_LOCALNRANKS", size: "PMI_SIZE"}, // hydra
	} {
		if v.hosts != "" {
			if h := os.Getenv(v.hosts); h != "" {
				return h == "1", true
			}
			continue
		}
		if local := os.Getenv(v.local); local != "" && os.Getenv(v.size) == size {
			return local == size, true
		}
	}
	return false, false
}
