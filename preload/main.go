// Command preload is libgocoll-preload.so; see doc.go.
package main

/*
#cgo CFLAGS: -O2 -Wall -Wno-unused-function
#cgo LDFLAGS: -ldl -lpthread
#include "preload.h"
*/
import "C"

func main() {}
