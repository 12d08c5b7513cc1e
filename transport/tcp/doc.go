// Package tcp is the transport between ranks on different hosts: one TCP
// connection per pair of ranks that talk, authenticated with the job's
// secret, carrying framed messages that are matched by (peer, tag).
//
// # Finding peers
//
// New is collective over the ranks of a bootstrap.KVS. Every rank listens
// on Options.Addr with a port chosen by the kernel, publishes "ip:port"
// under the key "gocoll-tcp-addr-<rank>", calls Fence and reads every
// peer's address. A rank that cannot listen publishes "none" instead, so
// that New fails at every rank rather than leaving the others in Fence.
// One Endpoint per KVS: a second New on the same KVS would reuse the keys.
//
// # Connecting: lazily, the lower rank's dial wins
//
// No connection is made in New. The first op with a peer (a send or a
// receive) makes the endpoint dial that peer in the background; ops queue
// until the connection is up. Collectives talk to few peers (a ring to 2,
// recursive doubling to log2 p), so a job of p ranks opens the connections
// its algorithms use instead of p(p-1)/2, and New costs one Fence whatever p
// is. The price: an unreachable peer is found at first use, where it fails
// the op, not in New. A receive dials too, so that a receive from a dead
// peer fails (connection refused) instead of waiting for a send that will
// never come.
//
// Both ranks of a pair may dial each other at the same moment. The
// acceptor decides, under the lock that guards its state for that peer:
// if it is dialing the same peer and has the lower rank, it answers the
// incoming dial "lost" and its own dial will win; otherwise it accepts.
// Each side's state changes under its own lock, so the two sides always
// keep the same single connection: the dial made by the lower rank when
// both dialed, the only dial otherwise. A dialer told "lost" waits for the
// peer's dial and fails the peer if it does not come within the handshake
// timeout. A second connection for a connected pair is refused and logged.
//
// # Handshake
//
// Dialer D, acceptor A, secret s, fresh 32-byte nonces nD and nA; integers
// are little-endian uint32; the secret itself never crosses the wire:
//
//	D -> A  "gocollT1" version D A nD                       52 bytes
//	A -> D  "gocollT1" version A nA HMAC-SHA256(s, "gocoll-tcp accept" D A nD nA)   80 bytes
//	D -> A  HMAC-SHA256(s, "gocoll-tcp dial" D A nA nD)      32 bytes
//	A -> D  verdict: 1 accept, 2 lost (use my dial), 3 refused   4 bytes
//
// Each side checks the other's MAC over its own fresh nonce, so a replayed
// handshake fails, and the two MACs have different labels, so one side's
// answer can never serve as the other's. The acceptor refuses, closes and
// logs to Options.Log a connection with a wrong magic, version, rank or
// MAC, or one that does not finish the handshake within the handshake
// timeout (10 s, or Options.Timeout if shorter); the job goes on. The
// dialer fails the peer's ops and logs when the acceptor's MAC is wrong.
//
// Without a secret (Options.Secret empty), rank 0 draws 32 random bytes
// and publishes them under "gocoll-tcp-secret" before the Fence, and every
// rank uses them: connections from outside the job are still refused, but
// the secret is only as private as the KVS is (a PMI server listening on a
// TCP port serves it to anyone who can reach that port). Launchers should
// pass a secret.
//
// # Frames
//
// After the handshake both directions carry frames: a 24-byte header
//
//	kind uint32 (1: data) | context uint32 | seq uint32 | round uint32 | length uint64
//
// (little-endian) and then length bytes of payload. Two control frames
// share the header (see Failures): status (kind 2, the rank this one waits
// for + 1 in the context field, no payload) and abandon (kind 3: context,
// seq, the failed rank in the round field, and a payload of a cause byte
// and up to 1 KiB of text). A header with another kind, or a length over
// MaxMessage, is a protocol error: the peer is logged and failed.
//
// # Receiving
//
// One reader goroutine per connection reads a header and looks for the
// first posted receive from that peer with the same tag. If there is one,
// the payload is read straight into its buffer; if the payload is longer
// than the buffer, it is read and discarded and the receive fails with
// transport.ErrTruncate. Otherwise the message is unexpected: its payload
// is read into pooled chunks (size classes of 64 B to 256 KiB, so a
// message never holds more memory than the bytes that actually arrived)
// and queued; a receive posted later takes the first queued message with
// its tag and copies it out. A receive posted while its message is still
// arriving takes over: the chunks read so far are copied, and the rest is
// read straight into the receive buffer. Queues are scanned from the
// front, so messages with one tag between one pair never overtake.
//
// # Sending
//
// Start queues a send; one writer goroutine per connection takes the queue
// in batches and writes headers and payloads with writev (net.Buffers),
// from the caller's buffer, at most 4 MiB per call so that progress is
// seen. A send completes when its bytes are handed to the kernel (eager,
// as the contract allows); Close may then still drop them if the peer has
// not read them yet.
//
// A send of at most 16 KiB that finds the connection's write side idle
// and nothing queued is written by Start itself: the frame is copied into
// the connection's staging buffer and written with one non-blocking
// write(2), and the send completes at once, since its bytes are in the
// kernel or staged; the writer finishes whatever the kernel did not take
// before anything else. This saves waking the writer goroutine, about
// 10% of a small message's latency on loopback.
//
// TCP_NODELAY is set. SO_SNDBUF and SO_RCVBUF are set to 4 MiB where
// net.core.wmem_max and rmem_max allow it; below those limits setting
// them would cap the buffers lower than the kernel's autotuning grows
// them, so they are left alone.
//
// # Failures
//
// An error on a connection (EOF, reset, protocol error) fails the peer:
// every pending op with it completes at once with a *transport.Error
// naming it and wrapping transport.ErrPeerFailed, and so does every later
// op with it, except receives that match messages that had fully arrived
// before the failure. With Options.Timeout set, a peer with pending ops
// that moves no byte for that long fails the same way with
// transport.ErrTimeout, and its connection is closed so that it fails
// too. Close fails pending ops with transport.ErrClosed, closes the
// listener and every connection, and waits for the endpoint's goroutines.
//
// Failures spread, so that every rank of a collective fails soon and names
// the rank that failed, not a neighbour that gave up because of it. An op
// that fails because its peer died, closed or stalled abandons its call (the
// tag's context and seq): the endpoint fails its other pending ops of that
// call with the same error and sends every connected peer an abandon frame
// naming the call, the failed rank and the cause; a peer that receives one
// does the same, once per call (it remembers the last 64), and names the
// failed rank "(reported by rank R)". If the reporting peer's connection
// then closes, as it does when the error ends its process, that closing is
// blamed on the rank it reported. Ops of other calls are not touched, and
// later ops with a live peer work. Wait, returning an error, first gives
// the writers up to 200 ms to send the frames queued.
//
// A stall is blamed on the rank that stalled: a rank that has waited a
// quarter of the timeout sends its connected peers a status frame saying
// which rank it waits for, every quarter of the timeout. Status frames are
// not progress; but a peer that says it waits for another rank is alive, so
// the watchdog gives up on it only after twice the timeout (meanwhile the
// rank it waits for times out at its own waiter, whose abandon frame
// arrives first), and at once if it says it waits for this rank, which is a
// deadlock: then only the pending ops fail, and the connection stays up
// for later calls.
//
// Steady state allocates nothing: headers and writev vectors are reused,
// unexpected payloads come from pools, and completion goes through one
// condition variable per endpoint.
package tcp
