package main

import (
	"fmt"
	"strconv"
	"strings"
)

// localHost is the host name that means "this machine, no launcher".
const localHost = "localhost"

// place assigns each of n ranks a host from the --host spec. Without a
// spec every rank is local. With plain names ("h1,h2") the ranks are split
// into contiguous blocks as evenly as possible, earlier hosts taking the
// extra ones: -n 5 over h1,h2 puts 0,1,2 on h1 and 3,4 on h2. With slot
// counts ("h1:2,h2:2"; a name without one has 1 slot) hosts are filled in
// order, and n may not exceed the slots.
func place(spec string, n int) ([]string, error) {
	out := make([]string, 0, n)
	if strings.TrimSpace(spec) == "" {
		for range n {
			out = append(out, localHost)
		}
		return out, nil
	}
	type entry struct {
		host  string
		slots int
	}
	var hosts []entry
	counted := false
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("--host %q: empty host name", spec)
		}
		e := entry{host: f, slots: 1}
		if h, s, ok := strings.Cut(f, ":"); ok {
			k, err := strconv.Atoi(s)
			if err != nil || k < 1 || h == "" {
				return nil, fmt.Errorf("--host %q: %q is not host:slots", spec, f)
			}
			e, counted = entry{h, k}, true
		}
		hosts = append(hosts, e)
	}
	if counted {
		for _, e := range hosts {
			for range e.slots {
				if len(out) < n {
					out = append(out, e.host)
				}
			}
		}
		if len(out) < n {
			return nil, fmt.Errorf("--host %q has %d slots for %d ranks", spec, len(out), n)
		}
		return out, nil
	}
	per, extra := n/len(hosts), n%len(hosts)
	for i, e := range hosts {
		k := per
		if i < extra {
			k++
		}
		for range k {
			out = append(out, e.host)
		}
	}
	return out, nil
}
