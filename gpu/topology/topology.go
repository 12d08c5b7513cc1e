// Package topology describes a node's NVIDIA GPUs through NVML
// (github.com/NVIDIA/go-nvml, which loads libnvidia-ml.so.1 at run time):
// each device's name, PCI bus id and memory, and which devices its
// NVLinks reach. gocollrun --info prints it. On a machine without the
// driver, Read says so and nothing else happens.
package topology

import (
	"fmt"
	"io"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Device is one GPU.
type Device struct {
	Index       int
	Name, UUID  string
	BusID       string   // PCI bus id, as cuDeviceGetPCIBusId writes it
	MemoryBytes uint64   // total device memory
	NVLink      []string // bus ids reached by active NVLinks, one per link
}

// Topology is a node's GPUs.
type Topology struct {
	DriverVersion string // the NVIDIA driver
	CUDAVersion   int    // the CUDA driver API version, as 12040 for 12.4
	Devices       []Device
}

// Read asks NVML (nvml.New() for the real library) about the node.
func Read(lib nvml.Interface) (Topology, error) {
	var t Topology
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return t, fmt.Errorf("NVML: %v", nvmlError(lib, ret))
	}
	defer lib.Shutdown()
	t.DriverVersion, _ = lib.SystemGetDriverVersion()
	t.CUDAVersion, _ = lib.SystemGetCudaDriverVersion()
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return t, fmt.Errorf("NVML: counting devices: %v", nvmlError(lib, ret))
	}
	for i := range n {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return t, fmt.Errorf("NVML: device %d: %v", i, nvmlError(lib, ret))
		}
		dev := Device{Index: i}
		dev.Name, _ = d.GetName()
		dev.UUID, _ = d.GetUUID()
		if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			dev.BusID = busID(pci)
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			dev.MemoryBytes = mem.Total
		}
		for link := range nvml.NVLINK_MAX_LINKS {
			state, ret := d.GetNvLinkState(link)
			if ret != nvml.SUCCESS {
				break // no more links (or no NVLink at all)
			}
			if state != nvml.FEATURE_ENABLED {
				continue
			}
			if pci, ret := d.GetNvLinkRemotePciInfo(link); ret == nvml.SUCCESS {
				dev.NVLink = append(dev.NVLink, busID(pci))
			}
		}
		t.Devices = append(t.Devices, dev)
	}
	return t, nil
}

func nvmlError(lib nvml.Interface, ret nvml.Return) string {
	if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
		return "libnvidia-ml.so.1 not found (no NVIDIA driver on this machine)"
	}
	return lib.ErrorString(ret)
}

// busID turns NVML's bus id into CUDA's spelling: lower case, a 4-digit
// domain ("00000000:3B:00.0" becomes "0000:3b:00.0").
func busID(pci nvml.PciInfo) string {
	b := make([]byte, 0, len(pci.BusId))
	for _, c := range pci.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	s := strings.ToLower(string(b))
	if i := strings.IndexByte(s, ':'); i > 4 {
		s = s[i-4:]
	}
	return s
}

// Print writes the topology: one line per device, then which device each
// NVLink connects to (by index when the peer is a device of this node).
func (t Topology) Print(w io.Writer) {
	fmt.Fprintf(w, "NVIDIA driver %s, CUDA %d.%d, %d device(s)\n", t.DriverVersion, t.CUDAVersion/1000, t.CUDAVersion%1000/10, len(t.Devices))
	index := map[string]int{}
	for _, d := range t.Devices {
		index[d.BusID] = d.Index
	}
	for _, d := range t.Devices {
		fmt.Fprintf(w, "  GPU %d: %s, PCI %s, %.1f GiB", d.Index, d.Name, d.BusID, float64(d.MemoryBytes)/(1<<30))
		if len(d.NVLink) == 0 {
			fmt.Fprintln(w, ", no NVLink")
			continue
		}
		peers := map[string]int{}
		var order []string
		for _, b := range d.NVLink {
			if peers[b] == 0 {
				order = append(order, b)
			}
			peers[b]++
		}
		var parts []string
		for _, b := range order {
			name := b
			if i, ok := index[b]; ok {
				name = fmt.Sprintf("GPU %d", i)
			}
			parts = append(parts, fmt.Sprintf("%s x%d", name, peers[b]))
		}
		fmt.Fprintf(w, ", NVLink to %s\n", strings.Join(parts, ", "))
	}
}
