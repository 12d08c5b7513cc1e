// Command gocoll-soak runs random collectives with full result checking,
// for a fixed number of iterations, to find the rare failure: a wrong
// answer, an error, a hang. It is not part of `make test`.
//
// As a rank (launched by gocollrun):
//
//	gocollrun -n 4 gocoll-soak -iters 2000 -seed 1
//
// each iteration picks, the same way on every rank (from the seed and
// the iteration): a communicator (the world, a dup, a split in two, the
// world reversed, the world without rank 0), a collective
// (MPI_Allreduce, MPI_Reduce_scatter, MPI_Reduce_scatter_block,
// MPI_Allgather, MPI_Allgatherv, in place or not), a datatype, an op
// (predefined, or user-defined and not commutative), a count (0 to 256K
// elements, skewed small; random recvcounts with zeros) and an algorithm
// (the tuner's, or any one forced). Every rank computes every rank's input
// and so the exact expected result, and compares. Rank 0 prints
//
//	soak: p=4 iterations=2000 calls=... bytes=... failures=0 elapsed=... per-iteration=...
//
// and the exit status is 1 if anything failed.
//
// As the driver of the whole matrix (not under gocollrun):
//
//	gocoll-soak -matrix [-iters 1000] [-ranks 2-8] [-configs shm,tcp,netns,netns-faults]
//
// runs gocollrun for every number of ranks and configuration: shm (one
// host: the shm algorithms and the schedule algorithms over the
// shared-memory transport), tcp (GOCOLL_TRANSPORT=tcp, schedule
// algorithms only), netns (two emulated hosts in network namespaces: TCP
// between them, shared memory inside) and netns-faults (the same with
// delay, loss and reordering between the hosts: tc netem where the kernel
// has it, else iptables and a user-space queue, see netem_linux.go), and
// prints, below the command, commit and machine (internal/provenance), one
// line per run and a table (results/soak.txt).
package main

import (
	"flag"
	"fmt"
	"github.com/gocoll/gocoll/internal/cmdhelp"
	"github.com/gocoll/gocoll/internal/provenance"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpi"
)

func main() {
	iters := flag.Int("iters", 1000, "iterations")
	seed := flag.Uint64("seed", 1, "seed of the random choices (the same on every rank)")
	maxCount := flag.Int("max-count", 256<<10, "largest count of elements per call")
	transportOnly := flag.Bool("transport-algorithms", false, "force a schedule algorithm on every call (never shm or the tuner's choice): the transports' paths")
	verbose := flag.Bool("v", false, "print every call (rank 0)")
	matrix := flag.Bool("matrix", false, "run the whole soak matrix through gocollrun (see the package doc)")
	ranks := flag.String("ranks", "2-8", "matrix: numbers of ranks, as 2-8 or 2,4,8")
	configs := flag.String("configs", "shm,tcp,netns,netns-faults", "matrix: configurations")
	netemQueue := flag.Int("netem-queue", -1, "internal: serve NFQUEUE N with -delay, -jitter and -reorder (netem_linux.go)")
	delay := flag.Duration("delay", time.Millisecond, "netem: delay of each packet")
	jitter := flag.Duration("jitter", 500*time.Microsecond, "netem: the delay varies by up to this, either way")
	reorder := flag.Float64("reorder", 5, "netem: percent of packets sent at once, overtaking the delayed ones")
	cmdhelp.Help{Name: "gocoll-soak", Summary: "run random collectives with full result checking to find rare failures", Usage: []string{"gocollrun -n N gocoll-soak [-iters 2000] [-seed 1]", "gocoll-soak -matrix [-iters 1000] [-ranks 2-8] [-configs shm,tcp,netns,netns-faults]"}, About: `As a rank, each iteration picks (the same on every rank) a communicator,
a collective, a datatype, an op, a count and an algorithm, and compares
the result with the exact one; the exit status is 1 if anything failed.
With -matrix it runs gocollrun for every rank count and configuration
(netns needs root).`}.Set(flag.CommandLine, os.Args[1:])
	flag.Parse()
	switch {
	case *netemQueue >= 0:
		if err := serveQueue(*netemQueue, *delay, *jitter, *reorder); err != nil {
			fmt.Fprintln(os.Stderr, "gocoll-soak:", err)
			os.Exit(1)
		}
		return
	case *matrix:
		// What results/soak.txt is headed by: the command, commit, machine.
		fmt.Print(provenance.New("").Comment(), "\n")
		os.Exit(runMatrix(*iters, *seed, *ranks, *configs))
	}
	os.Exit(soak(*iters, *seed, *maxCount, *transportOnly, *verbose))
}

// stats are one rank's counts.
type stats struct {
	calls, bytes, failures int64
}

func soak(iters int, seed uint64, maxCount int, transportOnly, verbose bool) int {
	world, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-soak:", err)
		return 1
	}
	p, me := world.Size(), world.Rank()
	// The communicators, and for each the world ranks of its members in
	// its rank order (to compute every member's input).
	type comm struct {
		name    string
		c       *mpi.Comm // nil where this rank is not a member
		members []int
	}
	var comms []comm
	add := func(name string, c *mpi.Comm, err error, members []int) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "gocoll-soak: rank %d: %s: %v\n", me, name, err)
			os.Exit(1)
		}
		comms = append(comms, comm{name, c, members})
	}
	all := make([]int, p)
	for i := range all {
		all[i] = i
	}
	add("world", world, nil, all)
	d, err := world.Dup()
	add("dup", d, err, all)
	var half []int
	for r := me % 2; r < p; r += 2 {
		half = append(half, r)
	}
	s, err := world.Split(me%2, me)
	add("split by parity", s, err, half)
	rev := slices.Clone(all)
	slices.Reverse(rev)
	s, err = world.Split(0, p-me)
	add("reversed", s, err, rev)
	color := 0
	if me == 0 {
		color = -1
	}
	s, err = world.Split(color, me)
	add("without rank 0", s, err, all[1:])

	var st stats
	start := time.Now()
	for it := range iters {
		rng := rand.New(rand.NewPCG(seed, uint64(it)))
		ci := rng.IntN(len(comms))
		cm := comms[ci]
		if ci == 2 { // the split's members depend on the parity: rebuild them per rank
			cm.members = nil
			for r := me % 2; r < p; r += 2 {
				cm.members = append(cm.members, r)
			}
		}
		c := call{rng: rng, members: cm.members, maxCount: maxCount, transportOnly: transportOnly}
		c.pick()
		if cm.c == nil {
			continue // not a member; the choices were still drawn
		}
		c.comm, c.rank = cm.c, cm.c.Rank()
		if verbose && me == 0 {
			fmt.Fprintf(os.Stderr, "soak: %d: %s on %s\n", it, c.describe(), cm.name)
		}
		n, err := c.run()
		st.calls++
		st.bytes += int64(n)
		if err != nil {
			st.failures++
			fmt.Fprintf(os.Stderr, "soak: rank %d: iteration %d: %s on %s: %v\n", me, it, c.describe(), cm.name, err)
			if strings.Contains(err.Error(), "MPI_") && !strings.Contains(err.Error(), "wrong result") {
				// An MPI error may leave the communicators out of step.
				return 1
			}
		}
	}
	elapsed := time.Since(start)
	sum := []int64{st.calls, st.bytes, st.failures}
	total := make([]int64, 3)
	if err := mpi.Allreduce(world, sum, total, mpi.Sum); err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-soak: final allreduce:", err)
		return 1
	}
	if me == 0 {
		fmt.Printf("soak: p=%d iterations=%d calls=%d bytes=%d failures=%d elapsed=%v per-iteration=%v\n",
			p, iters, total[0], total[1], total[2], elapsed.Round(time.Millisecond), (elapsed / time.Duration(max(iters, 1))).Round(time.Microsecond))
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-soak: finalize:", err)
		return 1
	}
	if total[2] > 0 {
		return 1
	}
	return 0
}

// algorithmsFor lists what a call may force: "" (the tuner's choice) and
// every algorithm of the collective, or only the schedule algorithms.
func algorithmsFor(c algorithms.Collective, transportOnly bool) []string {
	var names []string
	if !transportOnly {
		names = append(names, "", "")
	}
	for _, n := range algorithms.HostNames(c) {
		if !(transportOnly && n == "shm") {
			names = append(names, n)
		}
	}
	return names
}
