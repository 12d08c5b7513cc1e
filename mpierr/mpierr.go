// Package mpierr holds gocoll's error type and the MPI error classes it
// maps to. Every argument error names the MPI call and the argument, so
// that the C ABI can print `gocoll: MPI_Allreduce: invalid count -1
// (rank 3)` and return the right class, and Go callers can test the class
// with errors.As.
package mpierr

import (
	"errors"
	"fmt"
)

// Class is an MPI error class. The values are those of the MPICH ABI,
// which gocoll's mpi.h uses.
type Class int

const (
	Success  Class = 0
	Buffer   Class = 1  // MPI_ERR_BUFFER
	Count    Class = 2  // MPI_ERR_COUNT
	Type     Class = 3  // MPI_ERR_TYPE
	Tag      Class = 4  // MPI_ERR_TAG
	Comm     Class = 5  // MPI_ERR_COMM
	Rank     Class = 6  // MPI_ERR_RANK
	Root     Class = 7  // MPI_ERR_ROOT
	Group    Class = 8  // MPI_ERR_GROUP
	Op       Class = 9  // MPI_ERR_OP
	Arg      Class = 12 // MPI_ERR_ARG
	Unknown  Class = 13 // MPI_ERR_UNKNOWN
	Truncate Class = 14 // MPI_ERR_TRUNCATE
	Other    Class = 15 // MPI_ERR_OTHER
	Intern   Class = 16 // MPI_ERR_INTERN
	Request  Class = 19 // MPI_ERR_REQUEST
	NoMem    Class = 34 // MPI_ERR_NO_MEM
	// ProcAborted (MPI_ERR_PROC_ABORTED): a peer died or stopped answering.
	ProcAborted Class = 76
)

var classNames = map[Class]string{
	Success: "no error", Buffer: "invalid buffer", Count: "invalid count",
	Type: "invalid datatype", Tag: "invalid tag", Comm: "invalid communicator",
	Rank: "invalid rank", Root: "invalid root", Group: "invalid group",
	Op: "invalid reduce operation", Arg: "invalid argument", Unknown: "unknown error",
	Truncate: "message truncated", Other: "other error", Intern: "internal error",
	Request: "invalid request", NoMem: "out of memory",
	ProcAborted: "communication with a failed process",
}

// String returns the class's description, as MPI_Error_string gives it.
func (c Class) String() string {
	if s, ok := classNames[c]; ok {
		return s
	}
	return fmt.Sprintf("error class %d", int(c))
}

// Error is an error of one MPI call.
type Error struct {
	Call  string // the MPI call, e.g. "MPI_Allreduce"
	Class Class
	Msg   string // what is wrong, naming the argument
	Err   error  // the underlying error, if any
}

func (e *Error) Error() string {
	s := e.Call + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error with a formatted message.
func New(call string, class Class, format string, args ...any) *Error {
	return &Error{Call: call, Class: class, Msg: fmt.Sprintf(format, args...)}
}

// ClassOf returns the MPI class of err: Success for nil, the class of an
// *Error, Other for anything else.
func ClassOf(err error) Class {
	if err == nil {
		return Success
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Other
}
