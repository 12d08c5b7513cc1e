package algorithms_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/schedule"
)

// ringTable draws the ring allreduce on p ranks, one element per block, as
// the doc comment of allreduce_ring.go shows it.
func ringTable(p int) string {
	a, _ := algorithms.Lookup(algorithms.Allreduce, "ring")
	scheds := make([]*schedule.Schedule, p)
	for r := range scheds {
		scheds[r] = a.Build(algorithms.Params{P: p, Rank: r, Count: p, Commutative: true})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %-15s", "round", "phase")
	for r := range p {
		fmt.Fprintf(&b, " %-8s", fmt.Sprintf("rank %d", r))
	}
	b.WriteString("\n")
	for i := range scheds[0].Rounds {
		phase := "allgather"
		if len(scheds[0].Rounds[i].Steps) > 0 {
			phase = "reduce-scatter"
		}
		fmt.Fprintf(&b, "%-6d %-15s", i, phase)
		for r := range p {
			rd := scheds[r].Rounds[i]
			// The block received is where it lands, or, when it lands in
			// scratch, where it is reduced into.
			cell := fmt.Sprintf("s%d r%d", rd.Sends[0].Range.Off, rd.Recvs[0].Range.Off)
			if len(rd.Steps) > 0 {
				cell = fmt.Sprintf("s%d r%d+", rd.Sends[0].Range.Off, rd.Steps[0].Dst.Off)
			}
			fmt.Fprintf(&b, " %-8s", cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The drawing in allreduce_ring.go's doc comment is what the schedule does.
func TestRingDrawingIsTheSchedule(t *testing.T) {
	src, err := os.ReadFile("allreduce_ring.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "//\tround") || (len(doc) > 0 && len(doc) < 9 && strings.HasPrefix(line, "//\t")) {
			doc = append(doc, strings.TrimRight(strings.TrimPrefix(line, "//\t"), " "))
		}
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(ringTable(5)), "\n") {
		got = append(got, strings.TrimRight(line, " "))
	}
	if strings.Join(doc, "\n") != strings.Join(got, "\n") {
		t.Errorf("allreduce_ring.go's drawing:\n%s\n\nthe schedule:\n%s", strings.Join(doc, "\n"), strings.Join(got, "\n"))
	}
}

// hierTable draws the hierarchical allreduce on the given node map, as the
// doc comment of allreduce_hierarchical.go shows it: per rank and round,
// sN for a message to rank N, rN for one from rank N, + for a reduction,
// c for a copy, . for nothing; the phase is the intra-node phase before or
// after the inter-node one, which every message of an inter-node round
// crosses.
func hierTable(m *algorithms.NodeMap, count int) string {
	a, _ := algorithms.Lookup(algorithms.Allreduce, "hierarchical")
	p := m.P()
	scheds := make([]*schedule.Schedule, p)
	rounds := 0
	for r := range scheds {
		scheds[r] = a.Build(algorithms.Params{P: p, Rank: r, Count: count, Commutative: true, Nodes: m})
		rounds = max(rounds, len(scheds[r].Rounds))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %-15s", "round", "phase")
	for r := range p {
		fmt.Fprintf(&b, " %-8s", fmt.Sprintf("rank %d", r))
	}
	b.WriteString("\n")
	phase := "reduce-scatter"
	for i := range rounds {
		var cells []string
		for r := range p {
			if i >= len(scheds[r].Rounds) {
				cells = append(cells, ".")
				continue
			}
			rd := scheds[r].Rounds[i]
			var cell []string
			for _, x := range rd.Sends {
				cell = append(cell, fmt.Sprintf("s%d", x.Peer))
				if m.Node(x.Peer) != m.Node(r) {
					phase = "allreduce"
				} else if phase == "allreduce" {
					phase = "allgather"
				}
			}
			for _, x := range rd.Recvs {
				cell = append(cell, fmt.Sprintf("r%d", x.Peer))
			}
			op := ""
			for _, st := range rd.Steps {
				if st.Kind == schedule.Reduce {
					op = "+"
				} else if op == "" {
					op = "c"
				}
			}
			s := strings.Join(cell, " ") + op
			if len(cell) > 0 && op != "" {
				s = strings.Join(cell, " ") + " " + op
			}
			if s == "" {
				s = "."
			}
			cells = append(cells, s)
		}
		fmt.Fprintf(&b, "%-6d %-15s", i, phase)
		for _, c := range cells {
			fmt.Fprintf(&b, " %-8s", c)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The drawing in allreduce_hierarchical.go's doc comment is what the
// schedule does.
func TestHierarchicalDrawingIsTheSchedule(t *testing.T) {
	src, err := os.ReadFile("allreduce_hierarchical.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "//\tround") || (len(doc) > 0 && strings.HasPrefix(line, "//\t")) {
			doc = append(doc, strings.TrimRight(strings.TrimPrefix(line, "//\t"), " "))
		} else if len(doc) > 0 {
			break
		}
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(hierTable(algorithms.NodeMapOf([]int{0, 0, 1, 1, 2, 2}), 6)), "\n") {
		got = append(got, strings.TrimRight(line, " "))
	}
	if strings.Join(doc, "\n") != strings.Join(got, "\n") {
		t.Errorf("allreduce_hierarchical.go's drawing:\n%s\n\nthe schedule:\n%s", strings.Join(doc, "\n"), strings.Join(got, "\n"))
	}
}
