package job

import (
	"os"
	"strings"
	"testing"
)

// clearLaunchers empties every variable findLauncher reads, so that the
// environment the tests run in (perhaps a Slurm step) does not count.
func clearLaunchers(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PMIX_") {
			t.Setenv(k, "")
		}
	}
	for _, v := range []string{"PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE", "SLURM_STEP_NUM_TASKS",
		"SLURM_STEP_ID", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PALS_SIZE", "GOCOLL_JOB_ID",
		"MPI_LOCALNRANKS", "HYDI_CONTROL_FD", "PMIX_NAMESPACE", "PMIX_RANK", "PMIX_SERVER_URI4", "GOCOLL_PMI"} {
		t.Setenv(v, "")
	}
}

// A process with no launcher runs as one rank; one that shows a launcher
// it cannot reach fails, naming the launcher and what to do.
func TestFindLauncher(t *testing.T) {
	for _, tc := range []struct {
		env  []string // name, value pairs
		want []string // in the error; none: no launcher, no error
	}{
		{nil, nil},
		{[]string{"SLURM_STEP_NUM_TASKS", "1"}, nil}, // srun -n 1 without --mpi: one rank is right
		{[]string{"OMPI_COMM_WORLD_SIZE", "1"}, nil},
		{[]string{"SLURM_STEP_NUM_TASKS", "4"}, []string{"Slurm's srun", "SLURM_STEP_NUM_TASKS=4", "one of 4", "srun --mpi=pmi2"}},
		{[]string{"OMPI_COMM_WORLD_SIZE", "2"}, []string{"Open MPI's mpirun", "libpmix.so.2"}},
		{[]string{"PMI_SIZE", "3"}, []string{"hydra", "one of 3"}},
		{[]string{"MV2_COMM_WORLD_SIZE", "x"}, []string{"MVAPICH", "MV2_COMM_WORLD_SIZE=x"}},
		{[]string{"PMI_FD", "notafd"}, []string{"cannot speak PMI", "PMI_FD"}},
		{[]string{"PMI_PORT", "127.0.0.1:1", "GOCOLL_JOB_ID", "j"}, []string{"started by gocollrun", "cannot speak PMI"}},
		{[]string{"PMI_PORT", "127.0.0.1:1", "SLURM_STEP_ID", "0"}, []string{"srun (--mpi=pmi2)", "cannot speak PMI"}},
		{[]string{"PMIX_NAMESPACE", "j", "PMIX_RANK", "0", "PMIX_SERVER_URI4", "1.0;tcp4://127.0.0.1:1", "OMPI_COMM_WORLD_SIZE", "2"},
			[]string{"started by Open MPI mpirun", "cannot speak PMIx", "pmix: PMIx_Init: "}},
	} {
		clearLaunchers(t)
		for i := 0; i+1 < len(tc.env); i += 2 {
			t.Setenv(tc.env[i], tc.env[i+1])
		}
		l, err := findLauncher(0)
		if l != nil {
			t.Errorf("%v: found a launcher %s", tc.env, l.Name())
			l.Finalize()
			continue
		}
		if tc.want == nil {
			if err != nil {
				t.Errorf("%v: %v", tc.env, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: no error: the process would run as a job of one rank", tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not say %q", tc.env, err, w)
			}
		}
	}
}
