package ops_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gocoll/gocoll/ops"
)

func ExampleLookup() {
	sum, err := ops.Lookup(ops.Sum, ops.Double)
	if err != nil {
		panic(err)
	}
	a, b := make([]byte, 16), make([]byte, 16)
	for i, v := range []float64{1.5, 2} {
		binary.LittleEndian.PutUint64(a[8*i:], math.Float64bits(v))
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(10*v))
	}
	sum(b, a, b) // in place: b = a + b
	for i := range 2 {
		fmt.Println(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
	}

	_, err = ops.Lookup(ops.Band, ops.Double)
	fmt.Println(err)
	// Output:
	// 16.5
	// 22
	// MPI_BAND is not defined on MPI_DOUBLE (bitwise ops need an integer or MPI_BYTE)
}

func ExampleUserKernel() {
	// "Keep the left operand" is not commutative: the kernel must pass a,
	// the left operand, as the user function's in.
	keepLeft := func(in, inout []byte, count int) { copy(inout[:4*count], in) }
	k := ops.UserKernel(keepLeft, 4)

	a := binary.LittleEndian.AppendUint32(nil, 1)
	b := binary.LittleEndian.AppendUint32(nil, 2)
	k(b, a, b) // b = a op b
	fmt.Println(binary.LittleEndian.Uint32(b))
	// Output: 1
}
