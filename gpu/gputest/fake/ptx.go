package fake

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Entry is one kernel of a PTX module as the fake's "JIT" reads it.
type Entry struct {
	Name   string
	Params []Param // in declaration order
	Body   []string
}

// Param is one .param of an entry.
type Param struct{ Type, Name string }

var (
	entryRE   = regexp.MustCompile(`^\.visible\s+\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*\($`)
	paramRE   = regexp.MustCompile(`^\.param\s+(\.[a-z0-9]+)\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*,?$`)
	regDeclRE = regexp.MustCompile(`^\.reg\s+(\.[a-z0-9]+)\s+%([a-z]+)<(\d+)>;$`)
	regUseRE  = regexp.MustCompile(`%([a-z]+)(\d+)\b`)
	labelRE   = regexp.MustCompile(`^(\$?[A-Za-z_][A-Za-z0-9_$]*):$`)
	braRE     = regexp.MustCompile(`\bbra(?:\.uni)?\s+(\$?[A-Za-z_][A-Za-z0-9_$]*);`)
	paramUse  = regexp.MustCompile(`\[([A-Za-z_$][A-Za-z0-9_$]*)\]`)
)

// specials are the PTX special registers the kernels may read.
var specials = map[string]bool{"%tid": true, "%ntid": true, "%ctaid": true, "%nctaid": true}

// ParsePTX checks a module the way a JIT would before compiling it, as far
// as that is possible without one: the .version, .target and
// .address_size directives; balanced braces and parentheses; every entry
// with a parameter list and a body; every register used declared (and
// within its declared count), every label branched to defined once, every
// parameter loaded declared by the entry, every instruction ended by a
// semicolon, known (with its types and modifiers) and with operands of
// the kinds and register types it takes (ptxtypes.go). It returns the
// entries.
func ParsePTX(src string) ([]Entry, error) {
	if strings.Count(src, "{") != strings.Count(src, "}") {
		return nil, fmt.Errorf("ptx: %d '{' but %d '}'", strings.Count(src, "{"), strings.Count(src, "}"))
	}
	if strings.Count(src, "(") != strings.Count(src, ")") {
		return nil, fmt.Errorf("ptx: %d '(' but %d ')'", strings.Count(src, "("), strings.Count(src, ")"))
	}
	var lines []string
	for _, l := range strings.Split(src, "\n") {
		if i := strings.Index(l, "//"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	header := map[string]bool{}
	var entries []Entry
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, ".version "), strings.HasPrefix(l, ".target "), strings.HasPrefix(l, ".address_size "):
			if len(entries) > 0 {
				return nil, fmt.Errorf("ptx: %q after the first entry", l)
			}
			header[strings.Fields(l)[0]] = true
			continue
		}
		m := entryRE.FindStringSubmatch(l)
		if m == nil {
			return nil, fmt.Errorf("ptx: unexpected line %q outside an entry", l)
		}
		e := Entry{Name: m[1]}
		var raw []string
		for i++; i < len(lines) && lines[i] != ")"; i++ {
			pm := paramRE.FindStringSubmatch(lines[i])
			if pm == nil {
				return nil, fmt.Errorf("ptx: %s: bad parameter line %q", e.Name, lines[i])
			}
			e.Params = append(e.Params, Param{pm[1], pm[2]})
			raw = append(raw, lines[i])
		}
		for k, l := range raw {
			if strings.HasSuffix(l, ",") == (k == len(raw)-1) {
				return nil, fmt.Errorf("ptx: %s: commas in the parameter list", e.Name)
			}
		}
		if i+1 >= len(lines) || lines[i+1] != "{" {
			return nil, fmt.Errorf("ptx: %s: no body", e.Name)
		}
		depth := 0
		for i++; i < len(lines); i++ {
			if lines[i] == "{" {
				depth++
				if depth == 1 {
					continue
				}
			}
			if lines[i] == "}" {
				depth--
				if depth == 0 {
					break
				}
			}
			e.Body = append(e.Body, lines[i])
		}
		if depth != 0 {
			return nil, fmt.Errorf("ptx: %s: body not closed", e.Name)
		}
		if err := checkBody(e); err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	for _, d := range []string{".version", ".target", ".address_size"} {
		if !header[d] {
			return nil, fmt.Errorf("ptx: no %s directive", d)
		}
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.Name] {
			return nil, fmt.Errorf("ptx: entry %s defined twice", e.Name)
		}
		seen[e.Name] = true
	}
	return entries, nil
}

func checkBody(e Entry) error {
	regs := map[string]int{}     // prefix -> count
	types := map[string]string{} // prefix -> type
	labels := map[string]int{}
	params := map[string]bool{}
	for _, p := range e.Params {
		params[p.Name] = true
	}
	for _, l := range e.Body {
		if m := regDeclRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[3])
			regs[m[2]] = n
			types[m[2]] = m[1]
			continue
		}
		if m := labelRE.FindStringSubmatch(l); m != nil {
			labels[m[1]]++
			continue
		}
		if !strings.HasSuffix(l, ";") {
			return fmt.Errorf("ptx: %s: %q does not end with ';'", e.Name, l)
		}
	}
	for name, n := range labels {
		if n != 1 {
			return fmt.Errorf("ptx: %s: label %s defined %d times", e.Name, name, n)
		}
	}
	for _, l := range e.Body {
		if regDeclRE.MatchString(l) || labelRE.MatchString(l) {
			continue
		}
		for _, m := range braRE.FindAllStringSubmatch(l, -1) {
			if labels[m[1]] == 0 {
				return fmt.Errorf("ptx: %s: branch to undefined label %s", e.Name, m[1])
			}
		}
		for _, m := range paramUse.FindAllStringSubmatch(l, -1) {
			if strings.HasPrefix(l, "ld.param") && !params[m[1]] {
				return fmt.Errorf("ptx: %s: loads undeclared parameter %s", e.Name, m[1])
			}
		}
		for _, m := range regUseRE.FindAllStringSubmatch(l, -1) {
			if specials["%"+m[1]] {
				continue
			}
			n, ok := regs[m[1]]
			idx, _ := strconv.Atoi(m[2])
			if !ok || idx >= n {
				return fmt.Errorf("ptx: %s: register %%%s%s is not declared", e.Name, m[1], m[2])
			}
		}
		if err := checkInstr(l, types); err != nil {
			return fmt.Errorf("ptx: %s: %q: %v", e.Name, l, err)
		}
	}
	return nil
}
