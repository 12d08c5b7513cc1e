// Command capi is libgocoll.so: gocoll's MPI C ABI (and Fortran bindings),
// built with go build -buildmode=c-shared. The header is include/mpi.h.
//
// The layer is thin on purpose: mpi.c defines the C entry points. Small
// collectives on a communicator with a shared segment run in C on the
// shared-memory engine's C half (fast.c: predefined types and ops, host
// memory, no Go on the path); every other call is forwarded to a
// gocoll_<Name> function here, which decodes handles,
// checks what only the C side can get wrong (NULL pointers, handles), calls
// package coll or p2p, and turns errors into MPI error codes through the
// communicator's error handler. No Go pointer ever reaches C, and no Go
// panic crosses into C: every entry point recovers.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}/../intranode/engine -O2
#include "mpi.h"
void gocoll_call_user_fn(void *fn, void *in, void *inout, int len, MPI_Datatype dt);
*/
import "C"

// loadwait holds the library's loading until its Go runtime has started.
import _ "github.com/gocoll/gocoll/internal/loadwait"

func main() {}
