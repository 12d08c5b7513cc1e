// Package intranode runs the collectives of a communicator whose ranks
// share one host directly on shared memory, without a transport: the
// algorithms registered as "shm" in package algorithms.
//
// The communicator's ranks map one segment (created mode 0600 by rank 0
// and removed as soon as every rank has mapped it). It holds one control
// line per rank, a futex word for sleepers, two sets of p data slots and
// two result slots. A collective proceeds in steps: each rank writes its
// part of the step into its slot of the step's set and publishes the step
// number in its control line; once every rank has published it, each
// reads what it needs from all slots. Sets alternate between steps, and a
// rank reaches step k+2 (rewriting set k%2) only after every rank has
// published step k+1, that is, finished reading step k: no slot is ever
// overwritten while someone reads it.
//
// How much a step moves goes by size class (Steps): without a slot size
// set, an allreduce takes one step up to 128 KiB and then one per 512 KiB
// chunk, reducing this rank's slice of chunk i and copying chunk i-1's
// result out in the same step; a reduce-scatter or an allgather through
// the slots moves at most 512 KiB of every block a step. From 16 KiB a
// step, its data does not start at the slot's start but moves on through
// the slot each time the step's set comes round (placed), so that a rank
// rarely rewrites lines its peers have just read. A rank that reads
// nothing in a step (an empty reduce-scatter block, a bcast's root)
// leaves it without waiting; before it writes its slot again it waits
// for every rank to have published its last step (settled).
//
// A collective is a Call, its steps and where it stands in them: Finish
// takes them waiting (the blocking collectives are Start and Finish),
// Progress takes those the peers allow without waiting for any, so that
// a nonblocking collective moves from its caller's polls. While Progress
// finds peers missing it checks on them as a waiting rank does (below).
//
// Whoever reduces an element reads all p contributions from the slots and
// combines them in the canonical association T(0, p) (ops.Reduction; the
// C half alike), so that every count and path gives the bits reproducible
// mode requires, 16-bit floats accumulated in float32 and rounded once.
//
// Allgather of blocks of 32 KiB and more (1 MiB when there are more
// ranks than cores) takes two steps whatever the size: each rank publishes
// the address of its block, reads every peer's block straight from the
// peer's buffer with process_vm_readv (cross-memory attach, CMA: one copy
// instead of two through the slots), each as soon as that peer is there,
// and publishes that it is done, so that no rank returns, and reuses its
// buffer, while a peer still reads it. Attach makes the process readable by its siblings (PR_SET_PTRACER,
// for Yama's ptrace_scope=1) and has every rank read a probe word from
// every peer; if any read is refused (Yama, seccomp, no such system
// call), every rank copies through the slots at every size.
//
// Waiting polls for up to 100 µs (when there are more ranks than cores:
// calls sched_yield for up to 500 µs, handing the core to the rank it
// waits for, which halves small-message latency at 4 and 8 ranks on 2
// cores), then sleeps on the futex; publishing wakes sleepers only when
// there are some. A waiting rank checks every 100 ms whether the peers it
// waits for are alive (pidfd) and gives up after the communicator's
// timeout. A rank that gives up records on whom in its control line, so
// that the ranks that see it end next (an error is fatal by default)
// blame that rank, not the one that gave up.
//
// This package is the Go half of one engine; its C half, for calls that
// fit one step and must not enter Go (the C ABI's fast path), is package
// intranode/engine, whose constants are generated from this package's
// (LayoutConstants) and others' by go generate ./intranode/engine. The
// C half learns what fits one step from the rank's control line, where
// Attach writes the group's Steps and CMA threshold.
// Failures are the transport's errors (*transport.Error naming the rank
// in the group).
package intranode
