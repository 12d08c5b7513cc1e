// Command preload is libgocoll-preload.so; see doc.go.
package main

/*
#cgo CFLAGS: -O2 -Wall -Wno-unused-function -I${SRCDIR}/../intranode/engine
#cgo LDFLAGS: -ldl -lpthread
#include "preload.h"
*/
import "C"

func main() {} // comm.go imports intranode/engine, whose C half shim.c calls
