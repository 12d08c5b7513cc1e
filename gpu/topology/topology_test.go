package topology_test

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gocoll/gocoll/gpu/topology"
)

func pci(id string) nvml.PciInfo {
	var p nvml.PciInfo
	for i, c := range id {
		p.BusId[i] = int8(c)
	}
	return p
}

// Two GPUs joined by two NVLinks, as NVML's mock reports them.
func TestReadAndPrint(t *testing.T) {
	bus := []string{"00000000:3B:00.0", "00000000:AF:00.0"}
	dev := func(i int) *mock.Device {
		return &mock.Device{
			GetNameFunc:       func() (string, nvml.Return) { return "Fake H200", nvml.SUCCESS },
			GetUUIDFunc:       func() (string, nvml.Return) { return "GPU-0000", nvml.SUCCESS },
			GetPciInfoFunc:    func() (nvml.PciInfo, nvml.Return) { return pci(bus[i]), nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 141 << 30}, nvml.SUCCESS },
			GetNvLinkStateFunc: func(l int) (nvml.EnableState, nvml.Return) {
				if l >= 3 {
					return 0, nvml.ERROR_INVALID_ARGUMENT
				}
				if l == 2 {
					return nvml.FEATURE_DISABLED, nvml.SUCCESS
				}
				return nvml.FEATURE_ENABLED, nvml.SUCCESS
			},
			GetNvLinkRemotePciInfoFunc: func(int) (nvml.PciInfo, nvml.Return) { return pci(bus[1-i]), nvml.SUCCESS },
		}
	}
	lib := &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "550.54", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12040, nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc:     func(i int) (nvml.Device, nvml.Return) { return dev(i), nvml.SUCCESS },
	}
	topo, err := topology.Read(lib)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Devices) != 2 || topo.Devices[0].BusID != "0000:3b:00.0" || len(topo.Devices[1].NVLink) != 2 {
		t.Fatalf("%+v", topo)
	}
	var b strings.Builder
	topo.Print(&b)
	for _, want := range []string{"CUDA 12.4, 2 device(s)", "GPU 0: Fake H200, PCI 0000:3b:00.0, 141.0 GiB, NVLink to GPU 1 x2", "GPU 1: Fake H200, PCI 0000:af:00.0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

// Without the driver (this machine), Read says which library is missing.
func TestReadWithoutDriver(t *testing.T) {
	_, err := topology.Read(nvml.New())
	if err == nil {
		t.Skip("this machine has NVML")
	}
	if !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
		t.Errorf("error %q does not name the library", err)
	}
}
