package fake

import (
	"fmt"
	"regexp"
	"strings"
)

// The instruction checker: what ptxas refuses before it compiles
// anything, for the instructions gocoll's kernels use. An instruction
// must be one it knows, with a type the instruction takes and modifiers
// that fit it, and every operand must be of the right kind (register,
// vector of registers, address, immediate, label) with a register type
// that the PTX ISA's type-checking rules allow: the instruction's size
// (wider only for the integer and bit types of ld, st and cvt), a float
// instruction never on a signed or unsigned register nor an integer one
// on a float register (bit-size registers go with anything of their
// size), predicates where predicates go. It cannot know every rule of the
// ISA; an instruction it does not know is an error, so that a new one is
// added here, checked against the ISA, before a kernel uses it.

// ptxTypes are the fundamental types: their kind (b, s, u, f, pred) and
// bits.
var ptxTypes = map[string]struct {
	kind byte
	bits int
}{
	".pred": {'p', 1},
	".b8":   {'b', 8}, ".b16": {'b', 16}, ".b32": {'b', 32}, ".b64": {'b', 64},
	".s8": {'s', 8}, ".s16": {'s', 16}, ".s32": {'s', 32}, ".s64": {'s', 64},
	".u8": {'u', 8}, ".u16": {'u', 16}, ".u32": {'u', 32}, ".u64": {'u', 64},
	".f16": {'f', 16}, ".f32": {'f', 32}, ".f64": {'f', 64},
}

var (
	immRE     = regexp.MustCompile(`^-?(0[xX][0-9a-fA-F]+|[0-9]+)$`)
	regRE     = regexp.MustCompile(`^%[a-z]+[0-9]+$`)
	specialRE = regexp.MustCompile(`^%(tid|ntid|ctaid|nctaid)\.[xyz]$`)
	addrRE    = regexp.MustCompile(`^\[(%[a-z]+[0-9]+|[A-Za-z_$][A-Za-z0-9_$]*)(\+-?[0-9]+)?\]$`)
	labelOpRE = regexp.MustCompile(`^\$?[A-Za-z_][A-Za-z0-9_$]*$`)
)

// ptxOps are the instructions the checker knows: the types each takes.
var ptxOps = map[string][]string{
	"ld":     {".b16", ".b32", ".b64", ".u16", ".u32", ".u64", ".s32", ".s64", ".f32", ".f64"},
	"st":     {".b16", ".b32", ".b64", ".u16", ".u32", ".u64", ".s32", ".s64", ".f32", ".f64"},
	"mov":    {".pred", ".b16", ".b32", ".b64", ".u16", ".u32", ".u64", ".s32", ".s64", ".f32", ".f64"},
	"cvt":    nil, // two types, checked apart
	"cvta":   {".u64"},
	"setp":   {".b16", ".b32", ".b64", ".u16", ".u32", ".u64", ".s16", ".s32", ".s64", ".f32", ".f64"},
	"selp":   {".b16", ".b32", ".b64", ".u16", ".u32", ".u64", ".s16", ".s32", ".s64", ".f32", ".f64"},
	"add":    {".u16", ".u32", ".u64", ".s16", ".s32", ".s64", ".f32", ".f64"},
	"sub":    {".u16", ".u32", ".u64", ".s16", ".s32", ".s64", ".f32", ".f64"},
	"mul":    {".u16", ".u32", ".u64", ".s16", ".s32", ".s64", ".f32", ".f64"},
	"mad":    {".u16", ".u32", ".u64", ".s16", ".s32", ".s64", ".f32", ".f64"},
	"max":    {".u16", ".u32", ".u64", ".s16", ".s32", ".s64", ".f32", ".f64"},
	"min":    {".u16", ".u32", ".u64", ".s16", ".s32", ".s64", ".f32", ".f64"},
	"neg":    {".s16", ".s32", ".s64", ".f32", ".f64"},
	"and":    {".pred", ".b16", ".b32", ".b64"},
	"or":     {".pred", ".b16", ".b32", ".b64"},
	"xor":    {".pred", ".b16", ".b32", ".b64"},
	"not":    {".pred", ".b16", ".b32", ".b64"},
	"shl":    {".b16", ".b32", ".b64"},
	"shr":    {".b16", ".b32", ".b64", ".u16", ".u32", ".u64", ".s16", ".s32", ".s64"},
	"brev":   {".b32", ".b64"},
	"clz":    {".b32", ".b64"},
	"bra":    {},
	"ret":    {},
	"bar":    {},
	"trap":   {},
	"membar": {},
}

// setpCmps are setp's comparisons: the ordered and unordered float ones
// apply to floats only, lo/ls/hi/hs to unsigned and bit types.
var setpCmps = map[string]string{
	"eq": "any", "ne": "any", "lt": "num", "le": "num", "gt": "num", "ge": "num",
	"lo": "uint", "ls": "uint", "hi": "uint", "hs": "uint",
	"equ": "f", "neu": "f", "ltu": "f", "leu": "f", "gtu": "f", "geu": "f", "num": "f", "nan": "f",
}

// checkInstr checks one instruction line (ending in ';') of an entry
// whose register families are declared with the types in regs (prefix
// -> type).
func checkInstr(line string, regs map[string]string) error {
	l := strings.TrimSuffix(line, ";")
	if strings.HasPrefix(l, "@") {
		f := strings.Fields(l)
		g := strings.TrimPrefix(f[0][1:], "!")
		if err := wantReg(g, ".pred", false, regs); err != nil {
			return fmt.Errorf("guard: %v", err)
		}
		l = strings.Join(f[1:], " ")
	}
	f := strings.Fields(l)
	if len(f) == 0 {
		return fmt.Errorf("empty instruction")
	}
	parts := strings.Split(f[0], ".")
	op, mods := parts[0], parts[1:]
	for i := range mods {
		mods[i] = "." + mods[i]
	}
	args := splitOperands(strings.TrimSpace(strings.TrimPrefix(l, f[0])))
	allowed, known := ptxOps[op]
	if !known {
		return fmt.Errorf("the checker does not know instruction %q", f[0])
	}
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %d operands, has %d", f[0], n, len(args))
		}
		return nil
	}
	// typ is the instruction's (last) type; the other modifiers stay.
	var typ string
	if op != "cvt" && len(mods) > 0 && ptxTypes[mods[len(mods)-1]].bits > 0 {
		typ, mods = mods[len(mods)-1], mods[:len(mods)-1]
	}
	if op != "cvt" && len(allowed) > 0 && !contains(allowed, typ) {
		return fmt.Errorf("%s: %s does not take type %q", f[0], op, typ)
	}
	if len(allowed) == 0 && typ != "" {
		return fmt.Errorf("%s: %s takes no type", f[0], op)
	}
	tk := ptxTypes[typ]
	float := tk.kind == 'f'
	rounding := func(m string) bool { return m == ".rn" || m == ".rz" || m == ".rm" || m == ".rp" }
	switch op {
	case "ret", "trap":
		return want(0)
	case "bra":
		if err := onlyMods(f[0], mods, ".uni"); err != nil {
			return err
		}
		if err := want(1); err != nil {
			return err
		}
		if !labelOpRE.MatchString(args[0]) {
			return fmt.Errorf("%s: %q is not a label", f[0], args[0])
		}
		return nil
	case "ld", "st":
		if len(mods) == 0 || (mods[0] != ".global" && mods[0] != ".param") {
			return fmt.Errorf("%s: no state space, or one the checker does not know", f[0])
		}
		n := 1
		switch {
		case len(mods) == 2 && mods[1] == ".v2":
			n = 2
		case len(mods) == 2 && mods[1] == ".v4":
			n = 4
		case len(mods) != 1:
			return fmt.Errorf("%s: modifiers %v", f[0], mods)
		}
		if n*tk.bits > 128 {
			return fmt.Errorf("%s: a vector of %d bits (128 at most)", f[0], n*tk.bits)
		}
		if err := want(2); err != nil {
			return err
		}
		addr, val := args[1], args[0]
		if op == "st" {
			addr, val = args[0], args[1]
		}
		if err := checkAddr(addr, mods[0], regs); err != nil {
			return fmt.Errorf("%s: %v", f[0], err)
		}
		if mods[0] == ".param" && (n != 1 || op == "st") {
			return fmt.Errorf("%s: the checker knows only scalar loads of parameters", f[0])
		}
		return wantValues(f[0], val, n, typ, op == "st", regs)
	case "mov":
		if err := onlyMods(f[0], mods); err != nil {
			return err
		}
		if err := want(2); err != nil {
			return err
		}
		if specialRE.MatchString(args[1]) {
			if tk.bits != 32 || tk.kind == 'f' {
				return fmt.Errorf("%s: a special register is a .u32", f[0])
			}
		}
		// A vector on either side packs or unpacks: its elements add up
		// to the instruction's size.
		for i, a := range args {
			if strings.HasPrefix(a, "{") {
				el := elems(a)
				if len(el) != 2 && len(el) != 4 {
					return fmt.Errorf("%s: a vector of %d elements", f[0], len(el))
				}
				if tk.kind == 'f' || tk.kind == 'p' {
					return fmt.Errorf("%s: packing needs a bit-size type", f[0])
				}
				et := fmt.Sprintf(".b%d", tk.bits/len(el))
				for _, e := range el {
					if err := wantReg(e, et, false, regs); err != nil {
						return fmt.Errorf("%s: %v", f[0], err)
					}
				}
				continue
			}
			if i == 1 && (immRE.MatchString(a) || specialRE.MatchString(a)) {
				continue
			}
			if err := wantReg(a, typ, false, regs); err != nil {
				return fmt.Errorf("%s: %v", f[0], err)
			}
		}
		return nil
	case "cvt":
		var ts []string
		var rest []string
		for _, m := range mods {
			if ptxTypes[m].bits > 0 {
				ts = append(ts, m)
			} else {
				rest = append(rest, m)
			}
		}
		if len(ts) != 2 {
			return fmt.Errorf("%s: cvt takes two types", f[0])
		}
		dt, st := ptxTypes[ts[0]], ptxTypes[ts[1]]
		for _, m := range rest {
			switch {
			case rounding(m):
				// Float to float narrowing (and float to integer, or
				// integer to float) needs rounding; nothing else takes it.
				if dt.kind != 'f' && st.kind != 'f' {
					return fmt.Errorf("%s: rounding between integers", f[0])
				}
			case m == ".ftz" || m == ".sat":
			default:
				return fmt.Errorf("%s: modifier %s", f[0], m)
			}
		}
		narrowing := dt.kind == 'f' && st.kind == 'f' && dt.bits < st.bits
		if (narrowing || (dt.kind == 'f') != (st.kind == 'f')) && (len(rest) == 0 || !rounding(rest[0])) {
			return fmt.Errorf("%s: this conversion needs a rounding modifier", f[0])
		}
		if err := want(2); err != nil {
			return err
		}
		if err := wantReg(args[0], ts[0], true, regs); err != nil {
			return fmt.Errorf("%s: %v", f[0], err)
		}
		if immRE.MatchString(args[1]) {
			return nil
		}
		if err := wantReg(args[1], ts[1], true, regs); err != nil {
			return fmt.Errorf("%s: %v", f[0], err)
		}
		return nil
	case "cvta":
		if len(mods) != 2 || mods[0] != ".to" || mods[1] != ".global" {
			return fmt.Errorf("%s: the checker knows cvta.to.global only", f[0])
		}
		return operands(f[0], args, regs, typ, typ)
	case "setp":
		if len(mods) != 1 {
			return fmt.Errorf("%s: setp takes one comparison", f[0])
		}
		c, ok := setpCmps[strings.TrimPrefix(mods[0], ".")]
		switch {
		case !ok:
			return fmt.Errorf("%s: comparison %s", f[0], mods[0])
		case c == "f" && !float, c == "uint" && tk.kind != 'u' && tk.kind != 'b', c == "num" && tk.kind == 'b':
			return fmt.Errorf("%s: comparison %s on %s", f[0], mods[0], typ)
		}
		return operands(f[0], args, regs, ".pred", typ, typ)
	case "selp":
		if err := onlyMods(f[0], mods); err != nil {
			return err
		}
		return operands(f[0], args, regs, typ, typ, typ, ".pred")
	case "add", "sub", "max", "min", "neg":
		for _, m := range mods {
			if !(float && (rounding(m) || m == ".ftz" || m == ".sat")) {
				return fmt.Errorf("%s: modifier %s", f[0], m)
			}
		}
		if op == "neg" {
			return operands(f[0], args, regs, typ, typ)
		}
		return operands(f[0], args, regs, typ, typ, typ)
	case "mul", "mad":
		wide := false
		switch {
		case float:
			for _, m := range mods {
				if !rounding(m) && m != ".ftz" && m != ".sat" {
					return fmt.Errorf("%s: modifier %s", f[0], m)
				}
			}
		case len(mods) == 1 && (mods[0] == ".lo" || mods[0] == ".hi"):
		case len(mods) == 1 && mods[0] == ".wide" && tk.bits <= 32:
			wide = true
		default:
			return fmt.Errorf("%s: an integer %s needs .lo, .hi or .wide (16 or 32 bits)", f[0], op)
		}
		d := typ
		if wide {
			d = fmt.Sprintf(".%c%d", tk.kind, 2*tk.bits)
		}
		if op == "mad" {
			return operands(f[0], args, regs, d, typ, typ, d)
		}
		return operands(f[0], args, regs, d, typ, typ)
	case "and", "or", "xor":
		if err := onlyMods(f[0], mods); err != nil {
			return err
		}
		return operands(f[0], args, regs, typ, typ, typ)
	case "not", "brev":
		if err := onlyMods(f[0], mods); err != nil {
			return err
		}
		return operands(f[0], args, regs, typ, typ)
	case "clz":
		if err := onlyMods(f[0], mods); err != nil {
			return err
		}
		return operands(f[0], args, regs, ".u32", typ)
	case "shl", "shr":
		if err := onlyMods(f[0], mods); err != nil {
			return err
		}
		return operands(f[0], args, regs, typ, typ, ".u32")
	}
	return fmt.Errorf("the checker does not know instruction %q", f[0])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func onlyMods(inst string, mods []string, allowed ...string) error {
	for _, m := range mods {
		if !contains(allowed, m) {
			return fmt.Errorf("%s: modifier %s", inst, m)
		}
	}
	return nil
}

// splitOperands splits at the commas outside braces.
func splitOperands(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// elems returns a vector operand's registers.
func elems(v string) []string {
	var out []string
	for _, e := range strings.Split(strings.Trim(v, "{}"), ",") {
		out = append(out, strings.TrimSpace(e))
	}
	return out
}

// operands checks each operand against its type: the first is the
// destination (a register), the others registers or immediates.
func operands(inst string, args []string, regs map[string]string, types ...string) error {
	if len(args) != len(types) {
		return fmt.Errorf("%s takes %d operands, has %d", inst, len(types), len(args))
	}
	for i, a := range args {
		if i > 0 && immRE.MatchString(a) {
			if types[i] == ".pred" {
				return fmt.Errorf("%s: an immediate predicate", inst)
			}
			continue
		}
		if err := wantReg(a, types[i], false, regs); err != nil {
			return fmt.Errorf("%s: operand %d: %v", inst, i, err)
		}
	}
	return nil
}

// wantValues checks ld's destination or st's source: a register, or a
// vector of n registers, of type typ (integer and bit registers may be
// wider); a store may store an immediate.
func wantValues(inst, v string, n int, typ string, store bool, regs map[string]string) error {
	if n == 1 {
		if strings.HasPrefix(v, "{") {
			return fmt.Errorf("%s: a vector operand to a scalar access", inst)
		}
		if store && immRE.MatchString(v) {
			return nil
		}
		if err := wantReg(v, typ, true, regs); err != nil {
			return fmt.Errorf("%s: %v", inst, err)
		}
		return nil
	}
	if !strings.HasPrefix(v, "{") || len(elems(v)) != n {
		return fmt.Errorf("%s: want a vector of %d registers, have %q", inst, n, v)
	}
	for _, e := range elems(v) {
		if err := wantReg(e, typ, true, regs); err != nil {
			return fmt.Errorf("%s: %v", inst, err)
		}
	}
	return nil
}

// checkAddr checks an address operand: [reg], [reg+imm] with a 64-bit
// register, or [param] for ld.param.
func checkAddr(a, space string, regs map[string]string) error {
	m := addrRE.FindStringSubmatch(a)
	if m == nil {
		return fmt.Errorf("%q is not an address", a)
	}
	if space == ".param" {
		if strings.HasPrefix(m[1], "%") || m[2] != "" {
			return fmt.Errorf("%q: a parameter is loaded by name", a)
		}
		return nil
	}
	if !strings.HasPrefix(m[1], "%") {
		return fmt.Errorf("%q: a global address is in a register", a)
	}
	return wantReg(m[1], ".u64", false, regs)
}

// wantReg checks that operand r is a declared register whose type goes
// with an instruction type typ: the same size (larger for wide, with
// integer and bit types), no float register for an integer type nor an
// integer register for a float type; predicates only with .pred.
func wantReg(r, typ string, wide bool, regs map[string]string) error {
	if !regRE.MatchString(r) {
		return fmt.Errorf("%q is not a register", r)
	}
	prefix := strings.TrimRight(r[1:], "0123456789")
	decl, ok := regs[prefix]
	if !ok {
		return fmt.Errorf("register %s is not declared", r)
	}
	rt, it := ptxTypes[decl], ptxTypes[typ]
	if (rt.kind == 'p') != (it.kind == 'p') {
		return fmt.Errorf("register %s is %s, the operand %s", r, decl, typ)
	}
	if rt.kind != 'b' && it.kind != 'b' && (rt.kind == 'f') != (it.kind == 'f') {
		return fmt.Errorf("register %s is %s, the operand %s", r, decl, typ)
	}
	if rt.bits == it.bits {
		return nil
	}
	if wide && rt.bits > it.bits && rt.kind != 'f' && it.kind != 'f' {
		return nil
	}
	return fmt.Errorf("register %s is %s (%d bits), the operand %s", r, decl, rt.bits, typ)
}
