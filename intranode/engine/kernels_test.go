//go:build linux

package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/intranode"
	"github.com/gocoll/gocoll/ops"
)

// kernelTypes are one datatype of each kind the C kernels reduce.
var kernelTypes = []ops.Type{ops.SignedChar, ops.UnsignedChar, ops.Short, ops.UnsignedShort, ops.Int,
	ops.Unsigned, ops.Long, ops.UnsignedLong, ops.Float, ops.Double}

// cLevels returns the C kernels' levels this CPU runs (SetISA with no
// cap answers the best), leaving the C half uncapped.
func cLevels() []string {
	best := SetISA("")
	levels := []string{"go"}
	if best == "avx2" || best == "avx512" {
		levels = append(levels, "avx2")
	}
	if best == "avx512" {
		levels = append(levels, "avx512")
	}
	return levels
}

// special are the float values whose handling kernels get wrong: zeros
// of both signs, infinities, NaNs (quiet and signalling, both signs,
// payloads), the smallest and largest subnormals and normals, and
// neighbours that differ in the last bit.
var (
	special32 = []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000,
		0xffc12345, 1, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000,
		0x3f800001, 0xbf800000, 0x40490fdb}
	special64 = []uint64{0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000,
		0xfff8000000000000, 0x7ff0000000000001, 0x7ff4000000000000, 0xfff8000012345678, 1, 1<<63 | 1,
		0x000fffffffffffff, 0x0010000000000000, 0x7fefffffffffffff, 0xffefffffffffffff, 0x3ff0000000000000,
		0x3ff0000000000001, 0xbff0000000000000, 0x400921fb54442d18}
)

// kernelInput fills buf with elements of t: for floats, in turn special
// values, random finite numbers near each other (sums and products that
// round), equal pairs, and random bits; for integers, random bits with
// the extremes mixed in.
func kernelInput(buf []byte, t ops.Type, rng *rand.Rand) {
	size := t.Size()
	for at := 0; at+size <= len(buf); at += size {
		switch t.Scalar() {
		case "f32":
			var v uint32
			switch rng.IntN(4) {
			case 0:
				v = special32[rng.IntN(len(special32))]
			case 1:
				v = math.Float32bits(float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20))))
			case 2:
				v = 0x3f800000 + uint32(rng.IntN(8)) // near one: equal and neighbouring values
			default:
				v = rng.Uint32()
			}
			binary.LittleEndian.PutUint32(buf[at:], v)
		case "f64":
			var v uint64
			switch rng.IntN(4) {
			case 0:
				v = special64[rng.IntN(len(special64))]
			case 1:
				v = math.Float64bits(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(200)-100)))
			case 2:
				v = 0x3ff0000000000000 + uint64(rng.IntN(8))
			default:
				v = rng.Uint64()
			}
			binary.LittleEndian.PutUint64(buf[at:], v)
		default:
			for j := range size {
				buf[at+j] = byte(rng.Uint32())
			}
			switch rng.IntN(8) {
			case 0: // the largest and smallest, signed and unsigned
				for j := range size {
					buf[at+j] = 0xff
				}
			case 1:
				clear(buf[at : at+size])
				buf[at+size-1] = 0x80
			case 2:
				for j := range size {
					buf[at+j] = 0xff
				}
				buf[at+size-1] = 0x7f
			}
		}
	}
}

// sameBits compares two results element by element: bit for bit, except
// that where an IEEE SUM or PROD gives a NaN, any NaN will do (the
// payload the hardware propagates depends on the operands' order in the
// instruction). MAX and MIN return the canonical NaN: compared exactly.
func sameBits(got, want []byte, t ops.Type, op ops.Op) (int, bool) {
	size := t.Size()
	for at := 0; at+size <= len(want); at += size {
		g, w := got[at:at+size], want[at:at+size]
		if bytes.Equal(g, w) {
			continue
		}
		if op == ops.Sum || op == ops.Prod {
			switch t.Scalar() {
			case "f32":
				if math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(g)))) &&
					math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(w)))) {
					continue
				}
			case "f64":
				if math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(g))) &&
					math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(w))) {
					continue
				}
			}
		}
		return at / size, false
	}
	return 0, true
}

// The C kernels give package ops' kernels' bits for every op and kind
// they take, at every level the CPU has: over lengths around every
// vector width and unroll (the tails included), at offsets that misalign
// the vectors, with dst the very same buffer as a or as b, on random and
// special values.
func TestKernelsMatchGo(t *testing.T) {
	defer SetISA("")
	levels := cLevels()
	t.Logf("C kernel levels: %v; Go kernels: %s", levels, ops.ISA())
	rng := rand.New(rand.NewPCG(29, 1))
	lengths := []int{0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 4099}
	for _, typ := range kernelTypes {
		size, kind := mpichType(handles[typ])
		for _, op := range reduceOps {
			goK, err := ops.Lookup(op, typ)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range lengths {
				for _, off := range []int{0, 1, size + 3} {
					a := make([]byte, off+n*size)[off:]
					b := make([]byte, off+n*size)[off:]
					kernelInput(a, typ, rng)
					kernelInput(b, typ, rng)
					want := make([]byte, n*size)
					goK(want, a, b)
					for _, level := range levels {
						for alias := range 3 { // dst apart, dst = a, dst = b
							dst := make([]byte, off+n*size)[off:]
							x, y := bytes.Clone(a), bytes.Clone(b)
							switch alias {
							case 1:
								dst = x
							case 2:
								dst = y
							}
							combineAt(level, kind, int(op), dst, x, y, n)
							if i, ok := sameBits(dst, want, typ, op); !ok {
								t.Errorf("%v %v, level %s, n=%d offset %d alias %d: element %d: C %x, Go %x (operands %x, %x)",
									typ, op, level, n, off, alias, i, dst[i*size:(i+1)*size], want[i*size:(i+1)*size],
									a[i*size:(i+1)*size], b[i*size:(i+1)*size])
							}
						}
					}
				}
			}
		}
	}
}

// Every pair of special values, both ways round, at every level: the
// cases (NaNs, signed zeros, infinities) where MAX and MIN differ most
// between implementations, in the vector loops and in the scalar tails.
func TestKernelsSpecialPairs(t *testing.T) {
	defer SetISA("")
	for _, typ := range []ops.Type{ops.Float, ops.Double} {
		size, kind := mpichType(handles[typ])
		var vals [][]byte
		if size == 4 {
			for _, v := range special32 {
				vals = append(vals, binary.LittleEndian.AppendUint32(nil, v))
			}
		} else {
			for _, v := range special64 {
				vals = append(vals, binary.LittleEndian.AppendUint64(nil, v))
			}
		}
		var a, b []byte
		for _, x := range vals {
			for _, y := range vals {
				a, b = append(a, x...), append(b, y...)
			}
		}
		n := len(a) / size
		for _, op := range reduceOps {
			goK, _ := ops.Lookup(op, typ)
			want := make([]byte, len(a))
			goK(want, a, b)
			for _, level := range cLevels() {
				got := make([]byte, len(a))
				combineAt(level, kind, int(op), got, a, b, n)
				if i, ok := sameBits(got, want, typ, op); !ok {
					t.Errorf("%v %v, level %s: %x op %x: C %x, Go %x", typ, op, level,
						a[i*size:(i+1)*size], b[i*size:(i+1)*size], got[i*size:(i+1)*size], want[i*size:(i+1)*size])
				}
			}
		}
	}
}

// SetISA caps the C kernels as ops.CapISA caps the Go ones, and
// Attachable passes ops' level on.
func TestSetISA(t *testing.T) {
	defer SetISA("")
	defer ops.CapISA("")
	best := SetISA("")
	if got := SetISA("go"); got != "go" {
		t.Errorf(`SetISA("go") = %q`, got)
	}
	if best != "go" {
		if got := SetISA("avx2"); got != "avx2" {
			t.Errorf(`SetISA("avx2") = %q on a CPU whose best is %q`, got, best)
		}
	}
	if err := ops.CapISA("go"); err != nil {
		t.Fatal(err)
	}
	SetISA("")
	Attachable(intranode.Layout{}) // not one to attach to; the level passes on all the same
	if got := ISA(); got != "go" {
		t.Errorf("after ops.CapISA(go) and Attachable, the C level is %q", got)
	}
}

// Every level's loops are vector code of its width: compiled as cgo
// compiles them (-O2), the disassembly of each level's kernels adds,
// multiplies and compares floats and adds integers of every width in
// xmm (the baseline), ymm (AVX2) and zmm (AVX-512) registers.
func TestKernelsVectorise(t *testing.T) {
	for _, tool := range []string{"gcc", "objdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	obj := filepath.Join(t.TempDir(), "kernels.o")
	if out, err := exec.Command("gcc", "-O2", "-c", "kernels.c", "-o", obj).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	dis, err := exec.Command("objdump", "-d", "--no-show-raw-insn", obj).Output()
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string][]string{} // function: its instructions
	var cur string
	for _, line := range strings.Split(string(dis), "\n") {
		if strings.HasSuffix(line, ">:") {
			cur = line[strings.Index(line, "<")+1 : len(line)-2]
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 && cur != "" {
			funcs[cur] = append(funcs[cur], strings.Join(f[1:], " "))
		}
	}
	for level, reg := range map[string]string{"base": "%xmm", "avx2": "%ymm", "avx512": "%zmm"} {
		code := funcs["combine_"+level]
		if len(code) == 0 {
			t.Errorf("no combine_%s in kernels.o", level)
			continue
		}
		for _, insn := range []string{"addps", "addpd", "mulps", "mulpd", "paddb", "paddw", "paddd", "paddq", "cmp"} {
			found := false
			for _, c := range code {
				if strings.Contains(strings.Fields(c)[0], insn) && strings.Contains(c, reg) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("combine_%s: no %s on %s registers: a loop did not vectorise", level, insn, reg)
			}
		}
	}
}
