package bootstrap

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Launcher is a rank's connection to the process manager that started it:
// gocollrun or MPICH's hydra (PMI-1 or PMI-2), Slurm's srun (PMI-2 or
// PMIx), Open MPI's mpirun (PMIx). Its KVS methods count their round
// trips in Traffic.
type Launcher interface {
	KVS
	// Allgather gives every rank's blob, in rank order, in as few round
	// trips to the launcher as it allows: one put, one fence and, where the
	// launcher fetches in bulk (PMIx, gocollrun), no per-peer get.
	Allgather(mine []byte) ([][]byte, error)
	// Name says which launcher and protocol, for messages: "PMI-1",
	// "PMI-2 (Slurm)", "PMIx (Open MPI mpirun)".
	Name() string
	// Traffic is what this rank has asked of the launcher so far.
	Traffic() Traffic
	// Abort asks the launcher to kill the whole job with exit code code.
	Abort(code int, msg string) error
	// Finalize says goodbye; the launcher may then let the rank exit.
	Finalize() error
}

// NodeMapper is a Launcher that knows the node map itself (PMIx): the
// node of every rank, as small integers equal for ranks that share a node.
type NodeMapper interface {
	Nodes() ([]int, error)
}

// Traffic counts one rank's requests to its launcher. Every request is one
// round trip (a fence is one however long it waits).
type Traffic struct {
	Puts, Gets, Fences int
	// Bulk counts requests that fetch many ranks' values at once.
	Bulk int
	// Other counts the rest: the handshake (init, limits, names).
	Other int
	// Bytes is the payload sent and received: keys and values.
	Bytes int
}

// RoundTrips is the number of requests.
func (t Traffic) RoundTrips() int { return t.Puts + t.Gets + t.Fences + t.Bulk + t.Other }

func (t Traffic) String() string {
	return fmt.Sprintf("%d round trips (%d puts, %d fences, %d gets, %d bulk gets, %d other), %d bytes", t.RoundTrips(), t.Puts, t.Fences, t.Gets, t.Bulk, t.Other, t.Bytes)
}

// BulkGetter is a KVS that can fetch one key of every rank in one request
// (gocollrun's PMI-1 server offers it as an extension).
type BulkGetter interface {
	// GetRanks returns, for every rank r, the value of prefix+r.
	GetRanks(prefix string) ([]string, error)
}

// KVSAllgather is Allgather over a KVS that has only put, fence and get
// (PMI-1 and PMI-2): each rank puts its blob under one key per fence
// generation (split over several keys only beyond maxValue bytes), one
// fence, then one get per other rank, or one request where kvs is a
// BulkGetter. gen must be different at every call (count the calls).
// maxValue is the longest value the launcher keeps.
func KVSAllgather(kvs KVS, gen, maxValue int, mine []byte) ([][]byte, error) {
	rank, size := kvs.Rank(), kvs.Size()
	prefix := "gocoll-ag" + strconv.Itoa(gen) + "-"
	// The first value is "<chunks>:<data>", the others "<data>"; base64
	// (URL alphabet, no padding) has no space, '=' or ';', which PMI's
	// wire formats reserve.
	enc := base64.RawURLEncoding.EncodeToString(mine)
	chunk := maxValue - 8
	if chunk < 16 {
		return nil, fmt.Errorf("bootstrap: the launcher keeps values of only %d bytes", maxValue)
	}
	n := max(1, (len(enc)+chunk-1)/chunk)
	for i := range n {
		part := enc[min(i*chunk, len(enc)):min((i+1)*chunk, len(enc))]
		key := prefix + strconv.Itoa(rank)
		if i == 0 {
			part = strconv.Itoa(n) + ":" + part
		} else {
			key += "-" + strconv.Itoa(i)
		}
		if err := kvs.Put(key, part); err != nil {
			return nil, err
		}
	}
	if err := kvs.Fence(); err != nil {
		return nil, err
	}
	var firsts []string
	if b, ok := kvs.(BulkGetter); ok {
		var err error
		if firsts, err = b.GetRanks(prefix); err != nil {
			return nil, err
		}
		if len(firsts) != size {
			return nil, fmt.Errorf("bootstrap: bulk get returned %d values for %d ranks", len(firsts), size)
		}
	}
	out := make([][]byte, size)
	for r := range size {
		if r == rank { // this rank's own needs no get
			out[r] = append([]byte(nil), mine...)
			continue
		}
		key := prefix + strconv.Itoa(r)
		var v string
		if firsts != nil {
			v = firsts[r]
		} else {
			var err error
			if v, err = kvs.Get(key); err != nil {
				return nil, err
			}
		}
		count, data, ok := strings.Cut(v, ":")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || n < 1 {
			return nil, fmt.Errorf("bootstrap: rank %d's value %q is not a gocoll blob", r, key)
		}
		var sb strings.Builder
		sb.WriteString(data)
		for i := 1; i < n; i++ {
			part, err := kvs.Get(key + "-" + strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			sb.WriteString(part)
		}
		if out[r], err = base64.RawURLEncoding.DecodeString(sb.String()); err != nil {
			return nil, fmt.Errorf("bootstrap: rank %d's blob: %w", r, err)
		}
	}
	return out, nil
}
