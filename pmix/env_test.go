package pmix

import (
	"os"
	"strings"
	"testing"
)

// clearLaunchEnv empties every variable InEnv looks at, in case the test
// itself runs under a launcher.
func clearLaunchEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PMIX_") || strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "SLURM_") {
			t.Setenv(k, "")
		}
	}
}

func TestInEnv(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		in   bool
		name string
	}{
		{nil, false, "a PMIx launcher"},
		{[]string{"OMPI_COMM_WORLD_SIZE", "2"}, false, "Open MPI mpirun"},
		{[]string{"PMIX_NAMESPACE", "123"}, true, "a PMIx launcher"},
		{[]string{"PMIX_RANK", "0", "OMPI_COMM_WORLD_SIZE", "4"}, true, "Open MPI mpirun"},
		{[]string{"PMIX_SERVER_URI41", "1.0;tcp4://127.0.0.1:5", "SLURM_STEP_ID", "0"}, true, "Slurm srun --mpi=pmix"},
		{[]string{"PMIX_SERVER_URI2", "", "SLURM_STEP_ID", "0"}, false, "Slurm srun --mpi=pmix"},
	} {
		t.Run(strings.Join(tc.env, ","), func(t *testing.T) {
			clearLaunchEnv(t)
			for i := 0; i < len(tc.env); i += 2 {
				t.Setenv(tc.env[i], tc.env[i+1])
			}
			in, name := InEnv()
			if in != tc.in || name != tc.name {
				t.Errorf("InEnv() = %v, %q; want %v, %q", in, name, tc.in, tc.name)
			}
		})
	}
}
