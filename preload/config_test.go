package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/preload/native"
	"github.com/gocoll/gocoll/tuner"
)

func envOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func mustConfig(t *testing.T, vars map[string]string, flavor string) *config {
	t.Helper()
	c, err := loadConfig(envOf(vars), flavor)
	if err != nil {
		t.Fatalf("%v: %v", vars, err)
	}
	return c
}

// queries are calls of every collective over sizes from 0 to 64 MiB
// (around every measured boundary), 1 to 8 ranks, on one host or not,
// with commutative ops and not.
func queries() []tuner.Query {
	var sizes []int64
	for b := int64(1); b <= 64<<20; b *= 2 {
		sizes = append(sizes, b-1, b, b+1, b+b/2)
	}
	var qs []tuner.Query
	for _, cl := range algorithms.Collectives {
		for p := 1; p <= 8; p++ {
			for _, bytes := range sizes {
				for _, shared := range []bool{true, false} {
					for _, comm := range []bool{true, false} {
						if !comm && !cl.Reduces() {
							continue
						}
						qs = append(qs, tuner.Query{Collective: cl, Bytes: bytes,
							Params: algorithms.Params{P: p, Commutative: comm, SharedMemory: shared && p > 1}})
					}
				}
			}
		}
	}
	return qs
}

// A call on device memory is never given to the host MPI (which may not
// be CUDA-aware) nor to an shm algorithm (the CPU cannot touch device
// memory); wherever the host-memory choice is one of gocoll's schedule
// algorithms, the device call gets the same one.
func TestDeviceChoices(t *testing.T) {
	for _, flavor := range []string{"openmpi", "mpich"} {
		c := mustConfig(t, map[string]string{"GOCOLL_CUDA": "off"}, flavor)
		natives, shms, same := 0, 0, 0
		for _, q := range queries() {
			host, err := c.choose(q)
			if err != nil {
				t.Fatalf("%s: %+v: %v", flavor, q, err)
			}
			q.Params.DeviceMemory = true
			dev, err := c.choose(q)
			if err != nil {
				t.Fatalf("%s: %+v on device memory: %v", flavor, q, err)
			}
			if dev.Extra == native.Name || dev.Alg == nil {
				t.Fatalf("%s: %+v on device memory: the host MPI chosen (%s)", flavor, q, dev.How())
			}
			if r := dev.Alg.Check(q.Params); r != nil || dev.Alg.Direct {
				t.Fatalf("%s: %+v on device memory: %s chosen: %v", flavor, q, dev.Alg.Name, r)
			}
			switch {
			case host.Extra == native.Name:
				natives++
			case host.Alg.Direct:
				shms++
			default:
				same++
				if dev.Alg != host.Alg {
					t.Errorf("%s: %+v: %s on host memory, %s on device memory", flavor, q, host.Alg.Name, dev.Alg.Name)
				}
			}
		}
		// The rules do give the host MPI and the shm algorithms host
		// calls, so the device calls above really were steered away.
		if natives == 0 || shms == 0 || same == 0 {
			t.Errorf("%s: host-memory choices: %d native, %d shm, %d others; want some of each", flavor, natives, shms, same)
		}
	}
}

func TestDeviceForced(t *testing.T) {
	q := tuner.Query{Collective: algorithms.Allreduce, Bytes: 1 << 20,
		Params: algorithms.Params{P: 4, Commutative: true, SharedMemory: true}}
	dq := q
	dq.Params.DeviceMemory = true

	// A forced shm algorithm runs host calls; device calls fall back to
	// the tuner's choice among gocoll's algorithms, saying why.
	c := mustConfig(t, map[string]string{"GOCOLL_CUDA": "off", "GOCOLL_ALLREDUCE_ALGORITHM": "shm", "GOCOLL_FALLBACK": "silent"}, "openmpi")
	if ch, err := c.choose(q); err != nil || ch.Extra == native.Name || ch.Alg.Name != "shm" || ch.How() != "forced" {
		t.Errorf("host memory, forced shm: %+v, %v", ch, err)
	}
	ch, err := c.choose(dq)
	if err != nil || ch.Extra == native.Name || ch.Alg.Direct || !strings.HasPrefix(ch.How(), "tuned (forced shm cannot run: ") ||
		!strings.Contains(ch.How(), "device memory") {
		t.Errorf("device memory, forced shm: %+v, %v", ch, err)
	}

	// GOCOLL_FALLBACK=error fails such a call instead.
	c = mustConfig(t, map[string]string{"GOCOLL_CUDA": "off", "GOCOLL_ALLREDUCE_ALGORITHM": "shm", "GOCOLL_FALLBACK": "error"}, "openmpi")
	if ch, err := c.choose(dq); err == nil {
		t.Errorf("device memory, forced shm, GOCOLL_FALLBACK=error: %+v, want an error", ch)
	}

	// A forced schedule algorithm runs device calls too.
	c = mustConfig(t, map[string]string{"GOCOLL_CUDA": "off", "GOCOLL_ALLREDUCE_ALGORITHM": "ring"}, "mpich")
	if ch, err := c.choose(dq); err != nil || ch.Extra == native.Name || ch.Alg.Name != "ring" || ch.How() != "forced" {
		t.Errorf("device memory, forced ring: %+v, %v", ch, err)
	}

	// Forced native: the C half sends every such call to the host before
	// asking (gc_forced_native); the device tuner accepts the setting.
	c = mustConfig(t, map[string]string{"GOCOLL_CUDA": "off", "GOCOLL_ALLREDUCE_ALGORITHM": "native"}, "openmpi")
	if c.tuner.Forced(algorithms.Allreduce) != native.Name {
		t.Errorf("forced native: the tuner has %q forced", c.tuner.Forced(algorithms.Allreduce))
	}
	if ch, err := c.choose(q); err != nil || ch.Extra != native.Name {
		t.Errorf("host memory, forced native: %+v, %v", ch, err)
	}
}

// GOCOLL_TUNING_FILE's rules apply to device calls, less the native ones.
func TestDeviceTuningFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	rules := `{"rules": [
		{"collective": "allreduce", "max_bytes": 1024, "algorithm": "native"},
		{"collective": "allreduce", "algorithm": "ring"}
	]}`
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustConfig(t, map[string]string{"GOCOLL_CUDA": "off", "GOCOLL_TUNING_FILE": path}, "openmpi")
	for _, bytes := range []int64{8, 1024, 1 << 20} {
		q := tuner.Query{Collective: algorithms.Allreduce, Bytes: bytes, Params: algorithms.Params{P: 4, Commutative: true}}
		host, err := c.choose(q)
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes <= 1024; (host.Extra == native.Name) != want {
			t.Errorf("%d bytes on host memory: %+v, native %v", bytes, host, want)
		}
		q.Params.DeviceMemory = true
		if dev, err := c.choose(q); err != nil || dev.Extra == native.Name || dev.Alg.Name != "ring" {
			t.Errorf("%d bytes on device memory: %+v, %v; want ring", bytes, dev, err)
		}
	}
}

func TestCUDAConfig(t *testing.T) {
	for _, bad := range []map[string]string{
		{"GOCOLL_CUDA": "maybe"},
		{"GOCOLL_CUDA": "off", "GOCOLL_CUDA_IPC": "2"},
	} {
		_, err := loadConfig(envOf(bad), "openmpi")
		name := "GOCOLL_CUDA=" + bad["GOCOLL_CUDA"]
		if v, ok := bad["GOCOLL_CUDA_IPC"]; ok {
			name = "GOCOLL_CUDA_IPC=" + v
		}
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %v, want one naming %s", bad, err, name)
		}
	}
	c := mustConfig(t, map[string]string{"GOCOLL_CUDA": "off", "GOCOLL_CUDA_IPC": "0"}, "openmpi")
	if c.cudaOn() || !c.coll.Device.NoIPC || !strings.Contains(c.cudaNote(), "off") {
		t.Errorf("GOCOLL_CUDA=off: CUDA on %v, NoIPC %v, %q", c.cudaOn(), c.coll.Device.NoIPC, c.cudaNote())
	}
	// On: the driver and a device, or an error that says which is missing.
	c, err := loadConfig(envOf(map[string]string{"GOCOLL_CUDA": "on"}), "openmpi")
	switch {
	case err != nil && !strings.Contains(err.Error(), "GOCOLL_CUDA=on"):
		t.Errorf("GOCOLL_CUDA=on: %v, want an error naming GOCOLL_CUDA=on", err)
	case err == nil && (!c.cudaOn() || !strings.Contains(c.cudaNote(), "CUDA on (device buffers run in gocoll)")):
		t.Errorf("GOCOLL_CUDA=on: CUDA on %v, %q", c.cudaOn(), c.cudaNote())
	}
}

// GOCOLL_OPS_ISA caps the kernels when the preload starts (ops reads no
// environment).
func TestOpsISA(t *testing.T) {
	t.Cleanup(func() { ops.CapISA("") })
	mustConfig(t, map[string]string{"GOCOLL_CUDA": "off", "GOCOLL_OPS_ISA": "go"}, "openmpi")
	if ops.ISA() != "go" {
		t.Errorf("GOCOLL_OPS_ISA=go: the kernels are %q", ops.ISA())
	}
}
