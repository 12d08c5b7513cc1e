package pmix

import (
	"os"
	"strings"
)

// InEnv says whether the environment shows that a PMIx server started this
// process (PMIX_NAMESPACE, PMIX_RANK or a PMIX_SERVER_URI* variable is
// set), and which launcher that is, for messages: "Open MPI mpirun",
// "Slurm srun --mpi=pmix" or "a PMIx launcher".
func InEnv() (bool, string) {
	found := os.Getenv("PMIX_NAMESPACE") != "" || os.Getenv("PMIX_RANK") != ""
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PMIX_SERVER_URI") && v != "" {
			found = true
		}
	}
	return found, launcherName()
}

// launcherName guesses the launcher from the variables it sets beside
// PMIx's own.
func launcherName() string {
	switch {
	case os.Getenv("OMPI_COMM_WORLD_SIZE") != "":
		return "Open MPI mpirun"
	case os.Getenv("SLURM_STEP_ID") != "":
		return "Slurm srun --mpi=pmix"
	}
	return "a PMIx launcher"
}
