package envvar

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// Every variable parses one way, and a bad value is an error that names
// it.
func TestParse(t *testing.T) {
	defaults := Settings{Timeout: DefaultTimeout, Transport: "auto", Fallback: FallbackWarn, Fit: true, TuneCalls: DefaultTuneCalls}
	s, err := Parse(env())
	if err != nil || !reflect.DeepEqual(s, defaults) {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	s, err = Parse(env("GOCOLL_DEBUG", "INFO", "GOCOLL_REPORT", "1", "GOCOLL_CHECK", "0", "GOCOLL_REPRODUCIBLE", "1",
		"GOCOLL_TIMEOUT", "90", "GOCOLL_TRANSPORT", "TCP", "GOCOLL_SHM_SLOT", "64k", "GOCOLL_SHM_CMA", "0",
		"GOCOLL_PROGRESS_THREAD", "1", "GOCOLL_FIT", "0", "GOCOLL_FIT_SAVE", " /x/machine.json ",
		"GOCOLL_ALLREDUCE_ALGORITHM", " ring ", "GOCOLL_ALLGATHER_ALGORITHM", "auto", "GOCOLL_REDUCE_SCATTER_ALGORITHM", "native",
		"GOCOLL_BCAST_ALGORITHM", "binomial", "GOCOLL_REDUCE_ALGORITHM", "binomial", "GOCOLL_GATHER_ALGORITHM", "linear",
		"GOCOLL_TUNING_FILE", "/x/rules.json", "GOCOLL_FALLBACK", "Silent",
		"GOCOLL_CUDA", "off", "GOCOLL_CUDA_IPC", "0", "GOCOLL_PMI", "2", "GOCOLL_OPS_ISA", "AVX2",
		"GOCOLL_TUNE", "Runtime", "GOCOLL_TUNE_CALLS", "4", "GOCOLL_TUNE_SAVE", "/x/tuned.json"))
	want := Settings{Debug: true, Report: true, Reproducible: true, Timeout: 90 * time.Second, Transport: "tcp",
		SharedSlot: 64 << 10, SharedNoCMA: true, ProgressThread: true, FitSave: "/x/machine.json",
		Forced: map[algorithms.Collective]string{algorithms.Allreduce: "ring", algorithms.ReduceScatter: Native,
			algorithms.Bcast: "binomial", algorithms.Reduce: "binomial", algorithms.Gather: "linear"},
		TuningFile: "/x/rules.json", Fallback: FallbackSilent,
		CUDA: CUDAOff, CUDANoIPC: true, PMI: 2, OpsISA: "avx2",
		Tune: TuneRuntime, TuneCalls: 4, TuneSave: "/x/tuned.json"}
	if err != nil || !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v, %v; want %+v", s, err, want)
	}
	for _, tc := range []struct {
		kv   []string
		want func(Settings) bool
	}{
		{[]string{"GOCOLL_TIMEOUT", "5m"}, func(s Settings) bool { return s.Timeout == 5*time.Minute }},
		{[]string{"GOCOLL_CUDA", "on"}, func(s Settings) bool { return s.CUDA == CUDAOn }},
		{[]string{"GOCOLL_CUDA", "AUTO", "GOCOLL_CUDA_IPC", "1"}, func(s Settings) bool { return s.CUDA == CUDAAuto && !s.CUDANoIPC }},
		{[]string{"GOCOLL_CUDA_IPC", "off"}, func(s Settings) bool { return s.CUDANoIPC }},
		{[]string{"GOCOLL_PMI", "1"}, func(s Settings) bool { return s.PMI == 1 }},
		{[]string{"GOCOLL_OPS_ISA", "best"}, func(s Settings) bool { return s.OpsISA == "" }},
		{[]string{"GOCOLL_OPS_ISA", "go"}, func(s Settings) bool { return s.OpsISA == "go" }},
		{[]string{"GOCOLL_FALLBACK", "error"}, func(s Settings) bool { return s.Fallback == FallbackError }},
		{[]string{"GOCOLL_FIT", "1"}, func(s Settings) bool { return s.Fit && s.FitSave == "" }},
		{[]string{"GOCOLL_TUNE", "off"}, func(s Settings) bool { return s.Tune == TuneOff }},
	} {
		if s, err := Parse(env(tc.kv...)); err != nil || !tc.want(s) {
			t.Errorf("%v: %+v, %v", tc.kv, s, err)
		}
	}
	for _, bad := range []struct{ name, value, says string }{
		{"GOCOLL_DEBUG", "loud", "want off, warn or info"}, {"GOCOLL_REPORT", "yes", "want 0 or 1"},
		{"GOCOLL_CHECK", "2", "want 0 or 1"}, {"GOCOLL_REPRODUCIBLE", "on", "want 0 or 1"},
		{"GOCOLL_TIMEOUT", "-5s", "want a duration"}, {"GOCOLL_TIMEOUT", "soon", "want a duration"},
		{"GOCOLL_TRANSPORT", "ib", "want auto, shm, tcp"},
		{"GOCOLL_SHM_SLOT", "0K", "want a size"}, {"GOCOLL_SHM_SLOT", "12MB", "want a size"}, {"GOCOLL_SHM_CMA", "off", "want 1 or 0"},
		{"GOCOLL_PROGRESS_THREAD", "yes", "want 0 or 1"}, {"GOCOLL_FIT", "off", "want 1 or 0"},
		{"GOCOLL_ALLREDUCE_ALGORITHM", "bogus", `MPI_Allreduce has no algorithm "bogus" (valid: `},
		{"GOCOLL_BCAST_ALGORITHM", "ring", `MPI_Bcast has no algorithm "ring" (valid: binomial)`},
		{"GOCOLL_REDUCE_ALGORITHM", "bogus", `MPI_Reduce has no algorithm "bogus" (valid: binomial)`},
		{"GOCOLL_GATHER_ALGORITHM", "binomial", `MPI_Gather has no algorithm "binomial" (valid: linear)`},
		// The host's collective is a candidate of the four the preload
		// intercepts only.
		{"GOCOLL_BCAST_ALGORITHM", Native, `MPI_Bcast has no algorithm "native"`},
		{"GOCOLL_FALLBACK", "loud", "want warn, error or silent"},
		{"GOCOLL_CUDA", "maybe", "want auto, off or on"}, {"GOCOLL_CUDA_IPC", "2", "want 1 or 0"},
		{"GOCOLL_PMI", "3", "want 1 or 2"}, {"GOCOLL_PMI", "pmix", "want 1 or 2"},
		{"GOCOLL_OPS_ISA", "sse9", "want best, avx512, avx2 or go"},
		{"GOCOLL_TUNE", "always", "want runtime or off"}, {"GOCOLL_TUNE_CALLS", "0", "want a number of calls"},
	} {
		_, err := Parse(env(bad.name, bad.value))
		named := bad.name + "=" + bad.value
		if bad.name == "GOCOLL_PMI" {
			named = bad.name + "=\"" + bad.value + "\""
		}
		if err == nil || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s=%s: %v", bad.name, bad.value, err)
		}
	}
}

func TestParseCUDA(t *testing.T) {
	for _, c := range []struct {
		in   string
		want CUDAMode
		bad  bool
	}{{"", CUDAAuto, false}, {"auto", CUDAAuto, false}, {"OFF", CUDAOff, false}, {"0", CUDAOff, false},
		{"on", CUDAOn, false}, {"1", CUDAOn, false}, {"maybe", 0, true}} {
		m, err := ParseCUDA(c.in)
		if (err != nil) != c.bad || (!c.bad && m != c.want) {
			t.Errorf("ParseCUDA(%q) = %v, %v", c.in, m, err)
		}
	}
}

// With a bad value, the other variables are still parsed, and the first
// error in Parse's order is the one returned.
func TestParseGoesOnAfterAnError(t *testing.T) {
	s, err := Parse(env("GOCOLL_DEBUG", "loud", "GOCOLL_TIMEOUT", "soon", "GOCOLL_OPS_ISA", "go"))
	if err == nil || !strings.Contains(err.Error(), "GOCOLL_DEBUG=loud") {
		t.Errorf("error %v, want GOCOLL_DEBUG's", err)
	}
	if s.OpsISA != "go" || s.Timeout != DefaultTimeout {
		t.Errorf("after the error: %+v", s)
	}
}

// Every collective with an algorithm variable is in All.
func TestForceVarsListed(t *testing.T) {
	listed := map[string]bool{}
	for _, v := range All {
		listed[v.Name] = true
	}
	for _, c := range Tuned {
		if !listed[ForceVar(c)] {
			t.Errorf("%s is not in All", ForceVar(c))
		}
	}
	for _, name := range []string{"GOCOLL_BCAST_ALGORITHM", "GOCOLL_REDUCE_ALGORITHM", "GOCOLL_GATHER_ALGORITHM"} {
		if !listed[name] {
			t.Errorf("%s is not in All", name)
		}
	}
}
