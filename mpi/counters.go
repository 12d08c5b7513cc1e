package mpi

import "github.com/gocoll/gocoll/coll/counters"

// CallCounts say how the calls of one collective ran in this process:
// which algorithms gocoll ran and how often a forced algorithm had to
// give way. They are the Go side of GOCOLL_REPORT's lines.
type CallCounts struct {
	// Go is the number of calls gocoll ran; the Algorithms add up to it.
	Go int64
	// Algorithms maps each algorithm that ran a call (its name in
	// docs/tuning.md, as WithAlgorithm takes it) to the number of calls it ran.
	Algorithms map[string]int64
	// Fallback is the number of calls whose forced algorithm
	// (WithAlgorithm, or GOCOLL_<COLLECTIVE>_ALGORITHM) could not run
	// them, so that the tuner's choice ran instead (GOCOLL_FALLBACK=warn
	// or silent; with error the call fails and is not counted).
	Fallback int64
}

// Counters returns, by MPI name (e.g. "MPI_Allreduce", "MPI_Barrier"),
// the counts of every collective this process has called, from the
// start: the ranks of RunLocal, goroutines of one process, add to the
// same counts. Counting costs one atomic add per call and allocates
// nothing; gocoll's own calls (setting up communicators, Finalize's
// barrier) are not counted.
func Counters() map[string]CallCounts {
	out := map[string]CallCounts{}
	for _, k := range counters.Snapshot() {
		cc := CallCounts{Go: k.Go, Fallback: k.Fallback, Algorithms: map[string]int64{}}
		for _, a := range k.Algorithms {
			cc.Algorithms[a.Name] = a.Calls
		}
		out[k.Call] = cc
	}
	return out
}
