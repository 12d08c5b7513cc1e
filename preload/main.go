// Command preload is libgocoll-preload.so; see doc.go.
package main

/*
#cgo CFLAGS: -O2 -Wall -Wno-unused-function -I${SRCDIR}/../intranode/engine
#cgo LDFLAGS: -ldl -lpthread
#include "preload.h"
*/
import "C"

import _ "github.com/gocoll/gocoll/intranode/engine" // the engine's C half, which shim.c calls

func main() {}
