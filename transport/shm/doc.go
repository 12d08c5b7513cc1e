// Package shm is the transport between ranks on one host: a shared-memory
// segment per host and job, lock-free rings for small messages, and for
// large ones cross-memory attach (process_vm_readv: one copy, by the
// receiver, straight from the sender's buffer) where the kernel allows it,
// and a pipelined copy through the rings where it does not.
//
// # Segment
//
// New is collective over every rank of the job. Ranks with the same
// bootstrap.HostID share one segment, /dev/shm/gocoll-<job>-<host>, where
// <host> numbers the hosts by their lowest rank. The lowest local rank
// creates it (O_EXCL, mode 0600, reserved with fallocate so that a full
// tmpfs is an error from New and not a SIGBUS later), every local rank maps
// it, and after a KVS fence the creator unlinks it: from then on it lives
// only in the mappings and goes away with the last process of the host,
// however the job ends. New takes three fences: host names, "segment
// created", "segment mapped".
//
//	offset 0        header, one page: magic, version, n local ranks,
//	                ring size, slots per rank, creator pid, closeEpoch
//	4 KiB           n control blocks of 256 B, one per local rank:
//	                  pid, state (attached | closed | dead), global rank,
//	                  address of the CMA probe word;
//	                  on its own cache line: bell (futex word), sleepers
//	                n x 1024 rendezvous slots of 8 B, each rank's own
//	page aligned    n x n rings, ring i->j at index i*n+j (i == j unused):
//	                  tail | head | waiting, each on its own cache line,
//	                  then ring-size bytes of records
//
// The ring size falls as the n*n rings multiply: 256 KiB up to 4 local
// ranks, then halving at 8, 16, 32, 64 and 128, down to 4 KiB. The segment
// is 4, 8, 16, 33, 66 and 133 MiB for 4, 8, 16, 32, 64 and 128 ranks, all
// reserved at once: /dev/shm must hold it (Docker's default of 64 MiB
// holds up to 32 ranks).
//
// # Rings
//
// Each ordered pair of local ranks has a single-producer, single-consumer
// ring: the producer alone stores tail, the consumer alone stores head,
// both free-running byte counts, so neither side takes a lock, and each
// side keeps a private copy of the other's index so that polling an idle
// ring reads one cache line. A record is a 32-byte header (kind, payload
// length, tag, aux) and its payload, padded to 64 bytes; headers never
// wrap, payloads may.
//
//	eager  the whole message, if it is at most the eager limit
//	rts    a larger message's address and length in the sender, and the
//	       index and generation of a rendezvous slot of the sender
//	data   the next chunk of a rendezvous message copied through the ring,
//	       and the receive it is for
//
// Messages between a pair keep their order because the ring is FIFO, the
// sender writes records in the order ops were started (sends that do not
// fit wait in a per-peer queue, and later ones wait behind them), and the
// receiver matches arrivals against its posted receives, and new receives
// against its unexpected arrivals, scanning both lists from the front.
//
// # Protocol
//
// Eager: Start copies the message into the ring and the send completes.
// The receiver copies it into the posted receive, or, if none is posted
// yet, into a pooled buffer on its unexpected list, so that rings never
// stay full while their receiver is inside Start or Wait.
//
// Rendezvous: the sender takes a slot, sets it to posted, and writes an rts
// record. Once the receive is matched, the receiver moves the slot on:
//
//	posted -> reading -> done   CMA: it reads the message straight from
//	                            the sender's buffer with process_vm_readv,
//	                            then the send completes
//	posted -> cts               copy: it asks for data records; the sender
//	                            copies chunks into the ring as room frees
//	                            (copy-in), the receiver copies them out
//	                            (copy-out), and the send completes when the
//	                            last chunk is in the ring
//	posted -> trunc             the receive buffer is too short: both fail
//	                            with ErrTruncate
//	posted -> failed            the receiver will never take it (closed)
//
// The sender withdraws a send (Close, failure) by moving posted back to
// free; a receiver that comes later finds the generation changed and fails
// its receive with ErrPeerFailed. A send being read cannot be withdrawn:
// its buffer is returned only when the reader is done or dead, or, once
// the sender's endpoint has failed, stalled (see Failure): the sender then
// moves the slot from reading to failed, and a reader that wakes up finds
// it changed (it moves reading to done with a compare-and-swap) and fails
// its receive.
//
// Answers go through the slot, not the ring, so a receiver never waits for
// room to acknowledge, and a rank that returns from Wait owes its peers
// nothing: every acknowledgement was a store it has already made.
//
// CMA or copy: New calls prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY) so that
// sibling processes may read it under Yama's ptrace_scope=1 (any process of
// the user may then ptrace it), then reads a probe word from each local
// peer with process_vm_readv. Where that works, rendezvous messages are
// read with CMA; where it fails (EPERM, ENOSYS: seccomp, containers), or
// where process_vm_readv later fails so, they are copied through the ring.
// CMA is one copy, by the receiver alone, so it keeps its speed when the
// sender is not running. The copy is two, by both sides at once: on the
// 2-core EPYC VM this was written on, whose kernel copied at 8-15 GB/s
// against memmove's 40-100 (AVX-512), the copy was up to 2-3x faster than
// CMA from 1 MiB up, when each process had a core to itself; but with one
// busy process beside the pair it fell to 2-3 GB/s, and CMA kept 4.5-5.
// See BenchmarkPingPong and BenchmarkExchange.
//
// Eager limit: a quarter of the ring, and at most 32 KiB where rendezvous
// uses CMA, 64 KiB where it copies. BenchmarkEagerLimit runs both paths at
// each size in the same pair of processes. On that VM the results came in
// two kinds, by where the processes ran: in one, eager won at every size up
// to 64 KiB (1.9-2.3 us against 3.7 at 32 KiB, 3.3 against 5.8-6.0 at
// 64 KiB); in the other, CMA won from 32 KiB (5.5 us against 6.7 at
// 32 KiB, 8.9 against 11.9 at 64 KiB), and they tied at 16 KiB. At 32 KiB
// eager gains more in the first than it loses in the second, and it takes
// an eighth of the ring, not a quarter. Copying rendezvous messages never
// clearly beat eager up to 64 KiB: it pays a round trip and copies as
// often.
//
// # Progress and waiting
//
// There is no progress thread: ranks progress inside Start and Wait, under
// the endpoint's mutex, so several goroutines may use one endpoint. Start
// never waits for a peer. Wait polls (drain rings, push queued sends, look
// at rendezvous slots) while messages move. After 20 us without progress
// it calls sched_yield between polls, in case the peer it waits for needs
// this core, and at once where the host has fewer cores than local ranks.
// After 200 us without progress (10 us on such a host) it sleeps on the
// futex word in its control block with FUTEX_WAIT, the shared variant: the
// segment is a MAP_SHARED file, so waiters in any process meet on the same
// word. Whoever gives a rank
// work (a record, a slot answer, a Close, room in a full ring, which the
// producer asks for with the ring's waiting flag) adds one to its bell and,
// if it has sleepers, wakes them with FUTEX_WAKE. The sleeper counts itself
// before it reads the bell and polls once more, so no wake-up is lost. A
// goroutine that completes another's op rings its own endpoint's bell.
//
// Oversubscribed, 8 ranks on the VM's 2 cores (the test
// MultiProcessRingOversubscribed): a ring round of 8-byte messages takes 10-30 us and the
// sweep of 0 B to 16 MiB rings 0.5 s; with the waits made pure polling (no
// futex, no yield) the same run took 13-21 s, 5-9 ms a round.
//
// # Failure
//
// Close fails the endpoint's pending ops with ErrClosed, withdraws its
// rendezvous sends, refuses those waiting for it, marks its control block
// closed and rings every peer; peers drain what it sent before closing and
// fail their ops with it with ErrPeerFailed. Closes and deaths bump the
// header's closeEpoch, so noticing them costs one load per poll.
//
// A waiting rank checks every 100 ms whether a local peer's process has
// exited without closing, through a pidfd (kill(pid, 0) where there is
// none); a process_vm_readv that fails with ESRCH says so at once. It then
// marks the peer dead in the segment, so that every rank learns it at its
// next poll, and fails the endpoint: every pending and later op fails with
// a *transport.Error naming the dead rank with ErrPeerFailed. A local
// process that exits without calling Close counts as dead.
//
// Every rank names the rank at fault, not one that failed because of it
// and ended (MPI_ERRORS_ARE_FATAL ends the job from the first rank that
// fails): a rank publishes a death or a stall before it refuses or
// withdraws anything, and one that finds a send refused or withdrawn
// reads that news before it blames the sender; an endpoint that has
// failed publishes no more deaths, since later ones are consequences.
//
// With Options.Timeout, an op that sees no progress (a completion, or a
// chunk of its message) for that long fails the endpoint with ErrTimeout,
// naming the rank that stalled, which is not always the op's peer: a rank
// asleep in Wait publishes in its control block the rank it waits for and
// beats (counts its wake-ups, at least one per 100 ms). If the op's peer is
// asleep and beating, it is alive and waiting for another rank, the
// suspect; the suspect's own waiter blames it, and this rank gives up by
// itself only after twice the timeout, naming its peer and the rank it
// waits for. Ranks that wait for each other in a cycle are a deadlock
// (mismatched calls), reported at once. The rank that blames a stalled
// rank marks it stalled in the segment (and bumps closeEpoch), so that
// every local rank fails at once naming it; the stalled rank itself, should
// it wake up, fails too.
//
// # Limits
//
// 1024 rendezvous sends in flight per rank (more wait in the queue for a
// slot: a program that needs the 1025th matched before the first is
// received would deadlock); 65536 copied receives in flight per rank.
// Messages through one rank's pools are recycled: an op in steady state
// allocates nothing.
//
// A job killed inside New, between the creation of a segment and its
// unlinking (two KVS fences), leaves the segment behind. A later job with
// the same JobID removes it if its creator is gone; with random JobIDs
// nothing ever reuses the name.
package shm
