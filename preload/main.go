// Command preload is libgocoll-preload.so; see doc.go.
package main

/*
#cgo CFLAGS: -O2 -Wall -Wno-unused-function -I${SRCDIR}/../intranode/engine
#cgo LDFLAGS: -ldl -lpthread
#include "preload.h"
*/
import "C"

// loadwait holds the library's loading until its Go runtime has started.
import _ "github.com/gocoll/gocoll/internal/loadwait"

func main() {} // comm.go imports intranode/engine, whose C half shim.c calls
