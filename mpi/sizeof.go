package mpi

import "unsafe"

func sizeOf[T any](z T) uintptr { return unsafe.Sizeof(z) }
