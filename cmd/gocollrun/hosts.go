package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// localHost is the host name that means "this machine, no launcher".
const localHost = "localhost"

// maxHosts bounds one expanded host list, so that a typo such as
// node[1-100000000] is an error rather than an exhausted memory.
const maxHosts = 1 << 20

// hostEntry is one host of the job and its slots (0: not given).
type hostEntry struct {
	name  string
	slots int
}

// parseHosts reads a --host list: entries separated by commas, each a
// host or host:slots, where a host may be a Slurm-style range such as
// node[01-16,20] (expanded in order, zero-padding kept; a slot count
// applies to every host of the range).
func parseHosts(spec string) ([]hostEntry, error) {
	items, err := splitTop(spec)
	if err != nil {
		return nil, fmt.Errorf("host list %q: %w", spec, err)
	}
	var out []hostEntry
	for _, item := range items {
		slots := 0
		name := item
		// The slot count follows the last bracket: a[1-2]:4.
		if i := strings.LastIndexByte(item, ':'); i > strings.LastIndexByte(item, ']') {
			k, err := strconv.Atoi(item[i+1:])
			if err != nil || k < 1 {
				return nil, fmt.Errorf("host list %q: %q is not host:slots with slots >= 1", spec, item)
			}
			name, slots = item[:i], k
		}
		if name == "" {
			return nil, fmt.Errorf("host list %q: %q has no host name", spec, item)
		}
		names, err := expandRange(name)
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", spec, err)
		}
		for _, n := range names {
			out = append(out, hostEntry{n, slots})
			if len(out) > maxHosts {
				return nil, fmt.Errorf("host list %q: more than %d hosts", spec, maxHosts)
			}
		}
	}
	return out, nil
}

// expandHostList expands a Slurm-style host list ("node[01-03,7],login")
// to its host names, in order.
func expandHostList(spec string) ([]string, error) {
	items, err := splitTop(spec)
	if err != nil {
		return nil, fmt.Errorf("host list %q: %w", spec, err)
	}
	var out []string
	for _, item := range items {
		names, err := expandRange(item)
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", spec, err)
		}
		out = append(out, names...)
		if len(out) > maxHosts {
			return nil, fmt.Errorf("host list %q: more than %d hosts", spec, maxHosts)
		}
	}
	return out, nil
}

// splitTop splits s at the commas outside brackets and trims the items;
// an empty item or unbalanced brackets are errors.
func splitTop(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '[':
				if depth++; depth > 1 {
					return nil, errors.New("nested '['")
				}
				continue
			case ']':
				if depth--; depth < 0 {
					return nil, errors.New("']' without '['")
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth > 0 {
			return nil, errors.New("'[' without ']'")
		}
		item := strings.TrimSpace(s[start:i])
		if item == "" {
			return nil, errors.New("empty host name")
		}
		items = append(items, item)
		start = i + 1
	}
	return items, nil
}

// expandRange expands one host name with bracketed ranges, each a comma
// list of numbers and lo-hi ranges; several brackets multiply out, the
// last varying fastest, as Slurm does (r[1-2]n[1-2]: r1n1 r1n2 r2n1 r2n2).
func expandRange(name string) ([]string, error) {
	open := strings.IndexByte(name, '[')
	if open < 0 {
		if strings.ContainsAny(name, "] \t") {
			return nil, fmt.Errorf("bad host name %q", name)
		}
		return []string{name}, nil
	}
	end := strings.IndexByte(name[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: '[' without ']'", name)
	}
	end += open
	prefix, body := name[:open], name[open+1:end]
	if strings.ContainsAny(prefix, "] \t") {
		return nil, fmt.Errorf("bad host name %q", name)
	}
	rest, err := expandRange(name[end+1:])
	if err != nil {
		return nil, err
	}
	var out []string
	for _, part := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, errA := parseIndex(lo)
		b, errB := parseIndex(hi)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("%q: %q is not a number or lo-hi range of numbers", name, part)
		}
		if b < a {
			return nil, fmt.Errorf("%q: range %q runs backwards", name, part)
		}
		if (b-a+1)*len(rest) > maxHosts || len(out) > maxHosts {
			return nil, fmt.Errorf("%q: more than %d hosts", name, maxHosts)
		}
		for k := a; k <= b; k++ {
			n := fmt.Sprintf("%s%0*d", prefix, len(lo), k)
			for _, r := range rest {
				out = append(out, n+r)
			}
		}
	}
	return out, nil
}

// parseIndex reads the digits of a range bound.
func parseIndex(s string) (int, error) {
	if s == "" || len(s) > 9 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a number")
	}
	return strconv.Atoi(s)
}

// tasksPerNode expands Slurm's SLURM_TASKS_PER_NODE ("2(x3),1": 2 tasks
// on each of 3 nodes, then 1) to one count per node.
func tasksPerNode(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		count, times := f, "1"
		if c, t, ok := strings.Cut(f, "(x"); ok {
			if !strings.HasSuffix(t, ")") {
				return nil, fmt.Errorf("%q: %q is not N or N(xK)", s, f)
			}
			count, times = c, strings.TrimSuffix(t, ")")
		}
		n, errN := parseIndex(count)
		k, errK := parseIndex(times)
		if errN != nil || errK != nil || n < 1 || k < 1 || len(out)+k > maxHosts {
			return nil, fmt.Errorf("%q: %q is not N or N(xK)", s, f)
		}
		for range k {
			out = append(out, n)
		}
	}
	return out, nil
}

// readHostfile reads a hostfile: a host per line, as "host", "host
// slots=N" or "host:N" (host may be a Slurm-style range); # starts a
// comment.
func readHostfile(path string) ([]hostEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--hostfile: %w", err)
	}
	defer f.Close()
	var out []hostEntry
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		words := strings.Fields(text)
		if len(words) == 0 {
			continue
		}
		bad := func(why string) error {
			return fmt.Errorf("--hostfile %s line %d: %q: %s", path, line, strings.TrimSpace(text), why)
		}
		spec := words[0]
		for _, w := range words[1:] {
			v, ok := strings.CutPrefix(w, "slots=")
			if !ok {
				return nil, bad("want host, host:N or host slots=N")
			}
			if strings.ContainsRune(spec, ':') {
				return nil, bad("slots given twice")
			}
			spec += ":" + v
		}
		if strings.ContainsRune(spec, ',') {
			// One host (or one range) per line.
			if items, err := splitTop(spec); err != nil || len(items) > 1 {
				return nil, bad("one host per line")
			}
		}
		entries, err := parseHosts(spec)
		if err != nil {
			return nil, bad(err.Error())
		}
		out = append(out, entries...)
		if len(out) > maxHosts {
			return nil, bad(fmt.Sprintf("more than %d hosts", maxHosts))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--hostfile %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--hostfile %s names no host", path)
	}
	return out, nil
}

// place assigns each of n ranks a host. Without hosts every rank is
// local. mapBy "slot" places in blocks: with plain names ("h1,h2") the
// ranks are split into contiguous blocks as evenly as possible, earlier
// hosts taking the extra ones (-n 5 over h1,h2: 0,1,2 on h1, 3,4 on h2);
// with slot counts (a name without one has 1 slot) hosts are filled in
// order. mapBy "node" deals ranks round robin over the hosts, skipping
// hosts whose slots are full. With slot counts, n may not exceed the
// slots.
func place(hosts []hostEntry, n int, mapBy string) ([]string, error) {
	out := make([]string, 0, n)
	if len(hosts) == 0 {
		for range n {
			out = append(out, localHost)
		}
		return out, nil
	}
	counted, total := false, 0
	for _, h := range hosts {
		if h.slots > 0 {
			counted = true
		}
		total += max(h.slots, 1)
	}
	if counted && n > total {
		return nil, fmt.Errorf("the hosts have %d slots for %d ranks", total, n)
	}
	slots := func(h hostEntry) int { // -1: unlimited
		if !counted {
			return -1
		}
		return max(h.slots, 1)
	}
	switch mapBy {
	case "node":
		used := make([]int, len(hosts))
		for i := 0; len(out) < n; i = (i + 1) % len(hosts) {
			if s := slots(hosts[i]); s < 0 || used[i] < s {
				out = append(out, hosts[i].name)
				used[i]++
			}
		}
	case "slot":
		if counted {
			for _, h := range hosts {
				for range slots(h) {
					if len(out) < n {
						out = append(out, h.name)
					}
				}
			}
			break
		}
		per, extra := n/len(hosts), n%len(hosts)
		for i, h := range hosts {
			k := per
			if i < extra {
				k++
			}
			for range k {
				out = append(out, h.name)
			}
		}
	default:
		return nil, fmt.Errorf("--map-by %q: want node or slot", mapBy)
	}
	return out, nil
}
