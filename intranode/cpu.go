package intranode

import "github.com/gocoll/gocoll/internal/linuxsys"

// numCPU is the number of CPUs a node's ranks share (linuxsys.NodeCPUs):
// a group of more ranks is crowded.
func numCPU() int { return linuxsys.NodeCPUs() }
