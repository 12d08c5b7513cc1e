package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// A small PTX interpreter: enough of the ISA to run gocoll's kernels, one
// thread after another (each thread of a grid-stride loop owns its
// elements, so running them in turn is the same as running them at
// once). It gives the hand-written PTX a semantic test without a GPU:
// every kernel is run on vectors full of special values and compared,
// bit for bit, with package ops' host kernel of the same op and type.
// Instructions follow the PTX ISA: ordered comparisons are false on NaN,
// cvt.rn.f16.f32 rounds to nearest even (computed below by searching the
// 65536 binary16 values, independently of package ops).

type machine struct {
	prog                     []instr
	labels                   map[string]int
	params                   map[string]uint64
	mem                      []buffer // sorted by base
	regs                     map[string]uint64
	ctaid, ntid, tid, nctaid uint64
	steps                    int
}

// buffer is memory the kernel may touch: base address and bytes.
type buffer struct {
	base uint64
	b    []byte
}

// instr is one decoded instruction.
type instr struct {
	label bool   // a label, not an instruction
	guard string // predicate register, "" for none
	not   bool   // @!%p
	op    string
	args  []string
}

// decode reads an entry's body once.
func decode(body []string) ([]instr, map[string]int) {
	var prog []instr
	labels := map[string]int{}
	for _, line := range body {
		if strings.HasPrefix(line, ".reg") {
			continue
		}
		if strings.HasSuffix(line, ":") {
			labels[strings.TrimSuffix(line, ":")] = len(prog)
			continue
		}
		line = strings.TrimSuffix(line, ";")
		var in instr
		if strings.HasPrefix(line, "@") {
			f := strings.Fields(line)
			in.guard = f[0][1:]
			if strings.HasPrefix(in.guard, "!") {
				in.guard, in.not = in.guard[1:], true
			}
			line = strings.Join(f[1:], " ")
		}
		f := strings.Fields(line)
		in.op = f[0]
		if rest := strings.TrimSpace(strings.TrimPrefix(line, f[0])); rest != "" {
			depth, start := 0, 0
			for i, c := range rest {
				switch c {
				case '{':
					depth++
				case '}':
					depth--
				case ',':
					if depth == 0 {
						in.args = append(in.args, strings.TrimSpace(rest[start:i]))
						start = i + 1
					}
				}
			}
			in.args = append(in.args, strings.TrimSpace(rest[start:]))
		}
		prog = append(prog, in)
	}
	return prog, labels
}

func (m *machine) addBuffer(base uint64, b []byte) {
	i := sort.Search(len(m.mem), func(i int) bool { return m.mem[i].base >= base })
	m.mem = slices.Insert(m.mem, i, buffer{base, b})
}

// at returns n bytes at addr, which must be aligned to align: a GPU
// faults on a misaligned access.
func (m *machine) at(addr uint64, n, align int) []byte {
	if addr%uint64(align) != 0 {
		panic(fmt.Sprintf("ptx: misaligned access to %#x (%d bytes, aligned to %d)", addr, n, align))
	}
	i := sort.Search(len(m.mem), func(i int) bool { return m.mem[i].base > addr }) - 1
	if i >= 0 {
		b := m.mem[i]
		if addr+uint64(n) <= b.base+uint64(len(b.b)) {
			return b.b[addr-b.base : addr-b.base+uint64(n)]
		}
	}
	panic(fmt.Sprintf("ptx: access to %#x (%d bytes) outside every buffer", addr, n))
}

func (m *machine) val(op string) uint64 {
	switch op {
	case "%ctaid.x":
		return m.ctaid
	case "%ntid.x":
		return m.ntid
	case "%tid.x":
		return m.tid
	case "%nctaid.x":
		return m.nctaid
	}
	if strings.HasPrefix(op, "%") {
		v, ok := m.regs[op]
		if !ok {
			panic("ptx: read of unset register " + op)
		}
		return v
	}
	v, err := strconv.ParseUint(op, 0, 64)
	if err != nil {
		panic("ptx: bad operand " + op)
	}
	return v
}

// addr evaluates an address operand: [reg] or [reg+imm].
func (m *machine) addr(o string) uint64 {
	o = strings.Trim(o, "[]")
	if r, off, ok := strings.Cut(o, "+"); ok {
		k, err := strconv.ParseInt(off, 0, 64)
		if err != nil {
			panic("ptx: bad address " + o)
		}
		return m.val(r) + uint64(k)
	}
	return m.val(o)
}

// elems returns a vector operand's registers.
func elems(v string) []string {
	var out []string
	for _, e := range strings.Split(strings.Trim(v, "{}"), ",") {
		out = append(out, strings.TrimSpace(e))
	}
	return out
}

func f32(b uint64) float32 { return math.Float32frombits(uint32(b)) }
func f64(b uint64) float64 { return math.Float64frombits(b) }
func b32(f float32) uint64 { return uint64(math.Float32bits(f)) }
func b64(f float64) uint64 { return math.Float64bits(f) }
func flag(ok bool) uint64 {
	if ok {
		return 1
	}
	return 0
}

// halves are the finite binary16 values, sorted, for rounding.
var halves = func() []struct {
	v    float64
	bits uint16
} {
	var out []struct {
		v    float64
		bits uint16
	}
	for h := range 0x10000 {
		e, f := (h>>10)&0x1f, h&0x3ff
		if e == 0x1f || h&0x8000 != 0 {
			continue // the positive finite values: the sign is put back after
		}
		v := math.Ldexp(float64(f), -24)
		if e > 0 {
			v = math.Ldexp(float64(f|0x400), e-25)
		}
		if h&0x8000 != 0 {
			v = -v
		}
		out = append(out, struct {
			v    float64
			bits uint16
		}{v, uint16(h)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].v < out[j].v })
	return out
}()

func halfToFloat(h uint16) float32 {
	e, f := (h>>10)&0x1f, h&0x3ff
	var v float64
	switch {
	case e == 0x1f && f == 0:
		v = math.Inf(1)
	case e == 0x1f:
		return math.Float32frombits(uint32(h&0x8000)<<16 | 0x7fc00000 | uint32(f)<<13)
	case e == 0:
		v = math.Ldexp(float64(f), -24)
	default:
		v = math.Ldexp(float64(f|0x400), int(e)-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return float32(v)
}

// floatToHalf is cvt.rn.f16.f32: the nearest binary16, ties to the even
// significand, infinity beyond the largest finite value plus half an ulp;
// the sign is kept, zeros included.
func floatToHalf(f float32) uint16 {
	if f != f {
		return 0x7fff
	}
	v, sign := math.Abs(float64(f)), uint16(flag(math.Signbit(float64(f))))<<15
	if v >= 65520 {
		return sign | 0x7c00
	}
	i := sort.Search(len(halves), func(i int) bool { return halves[i].v >= v })
	if i == len(halves) { // between the largest finite value and the overflow threshold
		return sign | halves[i-1].bits
	}
	best := halves[i]
	if i > 0 {
		lo := halves[i-1]
		if d1, d2 := v-lo.v, best.v-v; d1 < d2 || (d1 == d2 && lo.bits&1 == 0) {
			best = lo
		}
	}
	return sign | best.bits
}

// run executes the kernel for one thread.
func (m *machine) run() {
	pc := 0
	for pc < len(m.prog) {
		if m.steps++; m.steps > 1e7 {
			panic("ptx: runaway kernel")
		}
		in := &m.prog[pc]
		pc++
		if in.guard != "" && (m.val(in.guard) != 0) == in.not {
			continue
		}
		ops := in.args
		var d string
		if len(ops) > 0 {
			d = ops[0]
		}
		arg := func(i int) uint64 { return m.val(ops[i]) }
		set := func(v uint64) { m.regs[d] = v }
		switch inst := in.op; inst {
		case "ret":
			return
		case "bra", "bra.uni":
			target, ok := m.labels[d]
			if !ok {
				panic("ptx: no label " + d)
			}
			pc = target
		case "ld.param.u64":
			set(m.params[strings.Trim(ops[1], "[]")])
		case "mov.b32", "mov.b64":
			half := map[string]uint{"mov.b32": 16, "mov.b64": 32}[inst]
			mask := uint64(1)<<half - 1
			switch {
			case strings.HasPrefix(d, "{"): // unpack: the first element is the low half
				v, e := arg(1), elems(d)
				m.regs[e[0]], m.regs[e[1]] = v&mask, v>>half&mask
			case strings.HasPrefix(ops[1], "{"): // pack
				e := elems(ops[1])
				set(m.val(e[0])&mask | (m.val(e[1])&mask)<<half)
			case inst == "mov.b32":
				set(arg(1) & 0xffffffff)
			default:
				set(arg(1))
			}
		case "cvta.to.global.u64", "mov.u32", "mov.u64", "mov.f32", "mov.f64":
			set(arg(1))
		case "mov.b16":
			set(arg(1) & 0xffff)
		case "cvt.u64.u32", "cvt.u32.u16", "cvt.u32.u64":
			set(arg(1) & map[string]uint64{"cvt.u64.u32": 0xffffffff, "cvt.u32.u16": 0xffff, "cvt.u32.u64": 0xffffffff}[inst])
		case "cvt.u16.u32":
			set(arg(1) & 0xffff)
		case "cvt.f32.f16":
			set(b32(halfToFloat(uint16(arg(1)))))
		case "cvt.rn.f16.f32":
			set(uint64(floatToHalf(f32(arg(1)))))
		case "mad.wide.u32":
			set(uint64(uint32(arg(1)))*uint64(uint32(arg(2))) + arg(3))
		case "mul.wide.u32":
			set(uint64(uint32(arg(1))) * uint64(uint32(arg(2))))
		case "shl.b64":
			set(arg(1) << arg(2))
		case "shr.u64":
			set(arg(1) >> arg(2))
		case "shl.b32":
			set(uint64(uint32(arg(1) << arg(2))))
		case "shr.u32":
			set(uint64(uint32(arg(1)) >> arg(2)))
		case "add.s64", "add.u64":
			set(arg(1) + arg(2))
		case "add.s32", "add.u32":
			set(uint64(uint32(arg(1) + arg(2))))
		case "sub.s32":
			set(uint64(uint32(arg(1) - arg(2))))
		case "neg.s32":
			set(uint64(uint32(-arg(1))))
		case "not.b32":
			set(uint64(^uint32(arg(1))))
		case "brev.b32":
			set(uint64(bits.Reverse32(uint32(arg(1)))))
		case "clz.b32":
			set(uint64(bits.LeadingZeros32(uint32(arg(1)))))
		case "mul.lo.s32", "mul.lo.u32":
			set(uint64(uint32(arg(1) * arg(2))))
		case "mul.lo.s64", "mul.lo.u64":
			set(arg(1) * arg(2))
		case "max.s32", "min.s32":
			x, y := int32(arg(1)), int32(arg(2))
			set(uint64(uint32(map[bool]int32{true: max(x, y), false: min(x, y)}[inst == "max.s32"])))
		case "max.u32", "min.u32":
			x, y := uint32(arg(1)), uint32(arg(2))
			set(uint64(map[bool]uint32{true: max(x, y), false: min(x, y)}[inst == "max.u32"]))
		case "max.s64", "min.s64":
			x, y := int64(arg(1)), int64(arg(2))
			set(uint64(map[bool]int64{true: max(x, y), false: min(x, y)}[inst == "max.s64"]))
		case "max.u64", "min.u64":
			x, y := arg(1), arg(2)
			set(map[bool]uint64{true: max(x, y), false: min(x, y)}[inst == "max.u64"])
		case "add.rn.f32":
			set(b32(f32(arg(1)) + f32(arg(2))))
		case "mul.rn.f32":
			set(b32(f32(arg(1)) * f32(arg(2))))
		case "add.rn.f64":
			set(b64(f64(arg(1)) + f64(arg(2))))
		case "mul.rn.f64":
			set(b64(f64(arg(1)) * f64(arg(2))))
		case "and.b16", "and.b32", "and.b64":
			set(arg(1) & arg(2))
		case "or.b16", "or.b32", "or.b64":
			set(arg(1) | arg(2))
		case "selp.b16", "selp.b32", "selp.b64", "selp.f32", "selp.f64":
			if arg(3) != 0 {
				set(arg(1))
			} else {
				set(arg(2))
			}
		case "setp.ge.u64", "setp.gt.u64", "setp.lt.u64", "setp.eq.u64":
			x, y := arg(1), arg(2)
			set(flag(map[string]bool{"setp.ge.u64": x >= y, "setp.gt.u64": x > y, "setp.lt.u64": x < y, "setp.eq.u64": x == y}[inst]))
		case "setp.gt.u32", "setp.lt.u32", "setp.eq.u32", "setp.ge.u32":
			x, y := uint32(arg(1)), uint32(arg(2))
			set(flag(map[string]bool{"setp.gt.u32": x > y, "setp.lt.u32": x < y, "setp.eq.u32": x == y, "setp.ge.u32": x >= y}[inst]))
		case "setp.gt.f32", "setp.lt.f32", "setp.nan.f32":
			x, y := f32(arg(1)), f32(arg(2))
			set(flag(map[string]bool{"setp.gt.f32": x > y, "setp.lt.f32": x < y, "setp.nan.f32": x != x || y != y}[inst]))
		case "setp.gt.f64", "setp.lt.f64", "setp.nan.f64":
			x, y := f64(arg(1)), f64(arg(2))
			set(flag(map[string]bool{"setp.gt.f64": x > y, "setp.lt.f64": x < y, "setp.nan.f64": x != x || y != y}[inst]))
		case "ld.global.f32", "ld.global.b32":
			set(uint64(binary.LittleEndian.Uint32(m.at(m.addr(ops[1]), 4, 4))))
		case "ld.global.f64", "ld.global.b64", "ld.global.u64":
			set(binary.LittleEndian.Uint64(m.at(m.addr(ops[1]), 8, 8)))
		case "ld.global.b16":
			set(uint64(binary.LittleEndian.Uint16(m.at(m.addr(ops[1]), 2, 2))))
		case "ld.global.v4.b32", "ld.global.v4.f32":
			b := m.at(m.addr(ops[1]), 16, 16)
			for i, r := range elems(d) {
				m.regs[r] = uint64(binary.LittleEndian.Uint32(b[4*i:]))
			}
		case "ld.global.v2.b64", "ld.global.v2.f64":
			b := m.at(m.addr(ops[1]), 16, 16)
			for i, r := range elems(d) {
				m.regs[r] = binary.LittleEndian.Uint64(b[8*i:])
			}
		case "st.global.f32", "st.global.b32":
			binary.LittleEndian.PutUint32(m.at(m.addr(d), 4, 4), uint32(m.val(ops[1])))
		case "st.global.f64", "st.global.b64":
			binary.LittleEndian.PutUint64(m.at(m.addr(d), 8, 8), m.val(ops[1]))
		case "st.global.b16":
			binary.LittleEndian.PutUint16(m.at(m.addr(d), 2, 2), uint16(m.val(ops[1])))
		case "st.global.v4.b32", "st.global.v4.f32":
			b := m.at(m.addr(d), 16, 16)
			for i, r := range elems(ops[1]) {
				binary.LittleEndian.PutUint32(b[4*i:], uint32(m.val(r)))
			}
		case "st.global.v2.b64", "st.global.v2.f64":
			b := m.at(m.addr(d), 16, 16)
			for i, r := range elems(ops[1]) {
				binary.LittleEndian.PutUint64(b[8*i:], m.val(r))
			}
		default:
			panic("ptx: the interpreter has no " + inst)
		}
	}
}

// newMachine prepares an entry to run, its parameters in order.
func newMachine(e fake.Entry, params ...uint64) *machine {
	m := &machine{params: map[string]uint64{}}
	m.prog, m.labels = decode(e.Body)
	for i, p := range e.Params {
		m.params[p.Name] = params[i]
	}
	return m
}

// grid runs the kernel on every thread of a grid of blocks.
func (m *machine) grid(grid, block int) {
	for c := range grid {
		for t := range block {
			m.regs = map[string]uint64{}
			m.ctaid, m.ntid, m.tid, m.nctaid = uint64(c), uint64(block), uint64(t), uint64(grid)
			m.run()
		}
	}
}

// launch runs a pairwise kernel over a grid, as the launcher's
// parameters say.
func launch(e fake.Entry, grid, block int, dst, a, b []byte, n int) {
	bases := []uint64{0x10000000, 0x20000000, 0x30000000}
	if &dst[0] == &a[0] { // in place: dst and a are one buffer
		bases[1] = bases[0]
	}
	m := newMachine(e, bases[0], bases[1], bases[2], uint64(n))
	m.addBuffer(bases[0], dst)
	if bases[1] != bases[0] {
		m.addBuffer(bases[1], a)
	}
	m.addBuffer(bases[2], b)
	m.grid(grid, block)
}

var hostTypes = map[gpu.Elem]ops.Type{
	gpu.F16: ops.Float16, gpu.BF16: ops.BFloat16, gpu.F32: ops.Float, gpu.F64: ops.Double,
	gpu.S32: ops.Int32, gpu.S64: ops.Int64, gpu.U32: ops.Uint32, gpu.U64: ops.Uint64,
}

// specials are bit patterns every vector starts with: zeros of both
// signs, NaNs with payloads, infinities, the smallest and largest values,
// values whose sum or product rounds to a tie.
func specials(e gpu.Elem) []uint64 {
	switch e {
	case gpu.F16:
		return []uint64{0x0000, 0x8000, 0x7e00, 0x7c01, 0xfe12, 0x7c00, 0xfc00, 0x0001, 0x8001, 0x7bff, 0xfbff, 0x3c00, 0x3c01, 0x1400, 0x0400, 0x03ff}
	case gpu.BF16:
		return []uint64{0x0000, 0x8000, 0x7fc0, 0x7f81, 0xffa5, 0x7f80, 0xff80, 0x0001, 0x8001, 0x7f7f, 0xff7f, 0x3f80, 0x3f81, 0x3b80, 0x0080, 0x007f}
	case gpu.F32:
		return []uint64{0, 0x80000000, 0x7fc00000, 0x7f800001, 0xffc01234, 0x7f800000, 0xff800000, 1, 0x80000001, 0x7f7fffff, 0x3f800000, 0x3f800001, 0x33800000}
	case gpu.F64:
		return []uint64{0, 1 << 63, 0x7ff8000000000000, 0x7ff0000000000001, 0xfff8000000001234, 0x7ff0000000000000, 0xfff0000000000000, 1, 0x7fefffffffffffff, 0x3ff0000000000000, 0x3ff0000000000001, 0x3ca0000000000000}
	case gpu.S32, gpu.U32:
		return []uint64{0, 1, 0xffffffff, 0x80000000, 0x7fffffff, 0x80000001, 0x10000}
	}
	return []uint64{0, 1, 1<<64 - 1, 1 << 63, 1<<63 - 1, 1<<63 + 1, 1 << 32}
}

// Every kernel computes what package ops' host kernel computes, bit for
// bit (a NaN made by a sum or product may differ in payload on the GPU,
// not here), on a grid of 3 blocks of 4 threads over 61 elements, in
// place and not.
func TestPTXSemantics(t *testing.T) {
	entries, err := fake.ParsePTX(gpu.PTX())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, e := range entries {
		op, el, ok := gpu.ParseKernelName(e.Name)
		if !ok {
			if _, _, _, peer := gpu.ParsePeerKernel(e.Name); !peer {
				t.Fatalf("entry %s", e.Name)
			}
			continue // TestPeerPTXSemantics
		}
		host, err := ops.Lookup(op, hostTypes[el])
		if err != nil {
			t.Fatal(err)
		}
		const n = 61
		size := el.Size()
		a, b := make([]byte, n*size), make([]byte, n*size)
		sp := specials(el)
		for i := range n {
			var x, y uint64
			switch {
			case i < len(sp)*len(sp) && i/len(sp) < len(sp): // pairs of specials
				x, y = sp[i%len(sp)], sp[(i/len(sp)+i)%len(sp)]
			default:
				x, y = rng.Uint64(), rng.Uint64()
			}
			if i%7 == 3 {
				y = x // equal operands
			}
			put(a[i*size:], x, size)
			put(b[i*size:], y, size)
		}
		want := make([]byte, n*size)
		host(want, a, b)
		for _, inPlace := range []bool{false, true} {
			got := make([]byte, n*size)
			x := append([]byte(nil), a...)
			dst := got
			if inPlace {
				dst = x
			}
			launch(e, 3, 4, dst, x, b, n)
			for i := range n {
				g, w := get(dst[i*size:], size), get(want[i*size:], size)
				if g == w || (op == ops.Sum || op == ops.Prod) && isNaN(el, g) && isNaN(el, w) {
					continue
				}
				t.Errorf("%s (in place %v): element %d: %#x op %#x = %#x, host kernel %#x", e.Name, inPlace, i,
					get(a[i*size:], size), get(b[i*size:], size), g, w)
				break
			}
		}
	}
}

// The grid-stride loop covers every element exactly once for any grid:
// more threads than elements, fewer, one.
func TestPTXGridStride(t *testing.T) {
	entries, _ := fake.ParsePTX(gpu.PTX())
	var e fake.Entry
	for _, x := range entries {
		if x.Name == "gocoll_sum_s32" {
			e = x
		}
	}
	for _, c := range []struct{ grid, block, n int }{{1, 1, 9}, {2, 3, 5}, {4, 8, 100}, {1, 32, 0}, {5, 7, 1}} {
		a, b, dst := make([]byte, 4*c.n+4), make([]byte, 4*c.n+4), make([]byte, 4*c.n+4)
		for i := range c.n + 1 {
			binary.LittleEndian.PutUint32(a[4*i:], uint32(i))
			binary.LittleEndian.PutUint32(b[4*i:], 1000)
			binary.LittleEndian.PutUint32(dst[4*i:], 7) // a canary past n
		}
		launch(e, c.grid, c.block, dst, a, b, c.n)
		for i := range c.n + 1 {
			want := uint32(i + 1000)
			if i == c.n {
				want = 7
			}
			if got := binary.LittleEndian.Uint32(dst[4*i:]); got != want {
				t.Errorf("grid %d x %d, n %d: element %d = %d, want %d", c.grid, c.block, c.n, i, got, want)
			}
		}
	}
}

func put(b []byte, v uint64, size int) {
	switch size {
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

func get(b []byte, size int) uint64 {
	switch size {
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func isNaN(e gpu.Elem, v uint64) bool {
	switch e {
	case gpu.F16:
		return v&0x7c00 == 0x7c00 && v&0x3ff != 0
	case gpu.BF16:
		return v&0x7f80 == 0x7f80 && v&0x7f != 0
	case gpu.F32:
		return v&0x7f800000 == 0x7f800000 && v&0x7fffff != 0
	case gpu.F64:
		return v&0x7ff0000000000000 == 0x7ff0000000000000 && v&0xfffffffffffff != 0
	}
	return false
}
