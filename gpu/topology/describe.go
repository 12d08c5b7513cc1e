package topology

import (
	"fmt"
	"io"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gocoll/gocoll/gpu"
)

// Describe writes what gocoll will do with CUDA on this machine, for
// gocollrun --info: the GOCOLL_CUDA mode, whether the driver loads, the
// GPUs NVML reports and how device buffers are handled, with CUDA IPC
// between the processes of a node unless noIPC (GOCOLL_CUDA_IPC=0).
func Describe(w io.Writer, mode gpu.Mode, noIPC bool) {
	fmt.Fprintf(w, "CUDA (GOCOLL_CUDA=%s):\n", mode)
	if mode == gpu.Off {
		fmt.Fprintln(w, "  off: every buffer is treated as host memory")
		return
	}
	if _, err := gpu.Load(); err != nil {
		fmt.Fprintf(w, "  driver: not loaded (%v): every buffer is host memory\n", err)
		if mode == gpu.On {
			fmt.Fprintln(w, "  GOCOLL_CUDA=on: MPI_Init will fail on this machine")
		}
	} else {
		fmt.Fprintln(w, "  driver: libcuda.so.1 loads; device buffers are recognised once the program has a CUDA context")
	}
	t, err := Read(nvml.New())
	if err != nil {
		fmt.Fprintf(w, "  %v\n", err)
	} else {
		var b strings.Builder
		t.Print(&b)
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	var names []string
	for _, e := range gpu.Elems {
		names = append(names, e.String())
	}
	ipc := "CUDA IPC between processes of one node"
	if noIPC {
		ipc = "no CUDA IPC (GOCOLL_CUDA_IPC=0)"
	}
	fmt.Fprintf(w, "  device buffers: staged through pinned host memory in 1 MiB segments between nodes, %s;\n", ipc)
	fmt.Fprintf(w, "  reductions on the GPU: MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN on %s; others on the host\n", strings.Join(names, ", "))
}
