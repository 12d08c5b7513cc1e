package intranode

import "runtime"

func numCPU() int { return runtime.NumCPU() }
