package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/ops"
)

// allHandles makes up a host with a handle per gocoll datatype and op
// (the handle is the type's or op's number).
func allHandles() hostHandles {
	var hh hostHandles
	for _, t := range ops.Types() {
		hh.types = append(hh.types, typeHandle{uint64(t), t})
	}
	for _, o := range ops.Ops() {
		hh.ops = append(hh.ops, opHandle{uint64(o), o})
	}
	return hh
}

// signedTwin is the signed type an MPICH-like host compares an unsigned
// one as.
var signedTwin = map[ops.Type]ops.Type{ops.UnsignedChar: ops.SignedChar, ops.UnsignedShort: ops.Short,
	ops.Unsigned: ops.Int, ops.UnsignedLong: ops.Long, ops.UnsignedLongLong: ops.LongLong,
	ops.Uint8: ops.Int8, ops.Uint16: ops.Int16, ops.Uint32: ops.Int32, ops.Uint64: ops.Int64}

// A made-up host that compares unsigned types as signed in MPI_MAX and
// MPI_MIN, and is otherwise gocoll: the probe finds exactly those pairs,
// and a host that is right everywhere gets no pair excluded.
func TestProbeFindsSignedCompare(t *testing.T) {
	hh := allHandles()
	reduce := func(bug bool) func(in, inout []byte, n int, dt, op uint64) int {
		return func(in, inout []byte, n int, dt, op uint64) int {
			ty, o := ops.Type(dt), ops.Op(op)
			if s, ok := signedTwin[ty]; ok && bug && (o == ops.Max || o == ops.Min) {
				ty = s
			}
			k, err := ops.Lookup(o, ty)
			if err != nil {
				return 1
			}
			k(inout, in, inout)
			return 0
		}
	}
	start := time.Now()
	if w := probeHost(hh, "test", "", reduce(false)); len(w) != 0 {
		t.Errorf("a right host: %d pairs found wrong, first %v %v: %s", len(w), w[0].op, w[0].t, w[0].what)
	}
	t.Logf("probing every pair of a right host (gocoll's kernels twice): %v", time.Since(start))
	var got, want []string
	for _, w := range probeHost(hh, "test", "", reduce(true)) {
		got = append(got, fmt.Sprint(w.op, " ", w.t))
	}
	for ty := range signedTwin {
		want = append(want, fmt.Sprint(ops.Max, " ", ty), fmt.Sprint(ops.Min, " ", ty))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("a host comparing unsigned as signed: found %v, want %v", got, want)
	}
}

// The table keys on flavor and version; its pairs are wrong without
// being tried.
func TestKnownWrong(t *testing.T) {
	for _, c := range []struct {
		flavor, version string
		op              ops.Op
		t               ops.Type
		wrong           bool
	}{
		{"mpich", "MPICH Version:\t4.0.2", ops.Sum, ops.Float16, true},
		{"mpich", "MPICH Version:\t4.1.2", ops.Sum, ops.Float16, false},
		{"openmpi", "Open MPI v4.1.4, package: Debian OpenMPI", ops.Prod, ops.CDoubleComplex, true},
		{"openmpi", "Open MPI v4.1.4, package: Debian OpenMPI", ops.Sum, ops.CDoubleComplex, false},
		{"openmpi", "Open MPI v5.0.3", ops.Prod, ops.CDoubleComplex, false},
		{"mpich", "MPICH Version:\t4.0.2", ops.Prod, ops.CDoubleComplex, false},
	} {
		if got := knownWrongOn(c.flavor, c.version, c.op, c.t) != ""; got != c.wrong {
			t.Errorf("%s %q: %v on %v: wrong %v, want %v", c.flavor, c.version, c.op, c.t, got, c.wrong)
		}
	}
	calls := 0
	w := probeHost(allHandles(), "mpich", "MPICH Version:\t4.0.2", func(in, inout []byte, n int, dt, op uint64) int {
		if ops.Type(dt) == ops.Float16 {
			t.Fatalf("the probe tried %v on MPIX_C_FLOAT16, which aborts MPICH 4.0", ops.Op(op))
		}
		calls++
		k, _ := ops.Lookup(ops.Op(op), ops.Type(dt))
		k(inout, in, inout)
		return 0
	})
	if len(w) != 4 || calls == 0 { // MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN
		t.Errorf("MPICH 4.0: %d pairs wrong, want the 4 ops on MPIX_C_FLOAT16: %v", len(w), w)
	}
}

func TestParseExclude(t *testing.T) {
	p, err := parseExclude("MPI_SUM:MPI_INT, MPI_MAX:MPI_UNSIGNED_CHAR")
	if err != nil || len(p) != 2 || p[0] != [2]uint8{uint8(ops.Sum), uint8(ops.Int)} || p[1] != [2]uint8{uint8(ops.Max), uint8(ops.UnsignedChar)} {
		t.Errorf("got %v, %v", p, err)
	}
	for _, bad := range []string{"MPI_SUM", "MPI_SUM:MPI_NOPE", "SUM:MPI_INT"} {
		if _, err := parseExclude(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// GOCOLL_PROGRESS_THREAD=1 under the preload needs the host at
// MPI_THREAD_MULTIPLE, and the refusal says so and what to do.
func TestProgressThreadNeedsMultiple(t *testing.T) {
	if err := progressThreadAllowed(3); err != nil {
		t.Errorf("MPI_THREAD_MULTIPLE refused: %v", err)
	}
	for level, name := range map[int]string{0: "MPI_THREAD_SINGLE", 2: "MPI_THREAD_SERIALIZED", -1: "an unknown level"} {
		err := progressThreadAllowed(level)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "MPI_Init_thread") {
			t.Errorf("level %d: %v", level, err)
		}
	}
}
