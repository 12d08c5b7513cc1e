package main

/*
#include "mpi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/gocoll/gocoll/mpierr"
)

// fail reports err from call on comm e (nil before a communicator is
// known) through its error handler: MPI_ERRORS_RETURN returns the error
// class; MPI_ERRORS_ARE_FATAL and MPI_ERRORS_ABORT print the error and
// end the job.
func fail(e *commEntry, err error) C.int {
	class := mpierr.ClassOf(err)
	if class == mpierr.Success {
		return C.MPI_SUCCESS
	}
	errh := C.MPI_Errhandler(errFatal)
	if e != nil {
		errh = e.errh
	} else if w := world(); w != nil {
		errh = w.errh
	}
	if errh == errReturn {
		return C.int(class)
	}
	rank := "?"
	if j := theJob(); j != nil {
		rank = fmt.Sprint(j.Rank)
	}
	fmt.Fprintf(os.Stderr, "gocoll: %v (rank %s)\n", err, rank)
	if phase.Load() != phaseRunning {
		// Before MPI_Init there is no job to abort, after MPI_Finalize
		// none any more: this process ends alone, with the class as its
		// exit status (its launcher ends the others).
		os.Exit(int(class))
	}
	abortJob(int(class))
	return C.int(class)
}

// rejected reports an argument error of a collective that the C ABI
// found before the call reached coll. With GOCOLL_CHECK the other ranks
// of e's communicator, waiting in the call's signature exchange, learn of
// it and fail the call too (coll.Comm.Rejected), instead of comparing
// their call with this rank's next one.
func rejected(e *commEntry, call string, err error) C.int {
	if e != nil {
		e.c.Rejected(call)
	}
	return fail(e, err)
}

// guard turns a panic in an entry point into an MPI_ERR_INTERN error, so
// that no Go panic ever unwinds into C. Every exported function defers
// it (or returns the result of one that does): tests/abifuzz_test.go
// checks that. Should reporting the error panic too, the process ends
// with MPI_ERR_INTERN as its status rather than let that one reach C.
func guard(call string, rc *C.int) {
	if v := recover(); v != nil {
		err := &mpierr.Error{Call: call, Class: mpierr.Intern, Msg: fmt.Sprintf("internal error: %v\n%s", v, debug.Stack())}
		defer func() {
			if v := recover(); v != nil {
				fmt.Fprintf(os.Stderr, "gocoll: %v\ngocoll: %s: reporting it failed too: %v\n", err, call, v)
				os.Exit(int(mpierr.Intern))
			}
		}()
		*rc = fail(nil, err)
	}
}

// argNull is the error of a NULL pointer argument, as MPICH reports it.
func argNull(call, arg string) error {
	return mpierr.New(call, mpierr.Arg, "%s is NULL", arg)
}

// errorString is the text of MPI_Error_string for an error code (gocoll's
// codes are the classes).
func errorString(code int) (string, error) {
	if code < 0 || code > int(mpierr.ProcAborted) {
		return "", errors.New("unknown error code")
	}
	return mpierr.Class(code).String(), nil
}
