package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// canned is collbench's output at 2 ranks (as bench/collbench.c prints
// it, -check included), with the times of allreduce 4 B, allreduce 8 KiB
// and allgather 4 B set by the caller.
func canned(ar4, ar8k, ag4 float64) string {
	return fmt.Sprintf(`# collbench: MPI_Barrier before every call, only the call timed; 1000 calls (after 200 warm-up) up to 8192 bytes, 100 (after 10) above; time per call: each rank's mean, then avg, min and max over 2 ranks
# collective bytes avg_us min_us max_us
# allreduce: MPI_Allreduce, MPI_FLOAT, MPI_SUM, size total (bytes of the whole vector)
allreduce 4 %.2f 0.10 9.00
allreduce 8192 %.2f 1.00 90.00
# reduce_scatter: MPI_Reduce_scatter, MPI_FLOAT, MPI_SUM, size total (bytes of the whole vector; recvcounts split it as evenly as can be, the first n %% np ranks one element more)
# reduce_scatter 4 recvcounts 1 0
reduce_scatter 4 0.70 0.60 0.80
# reduce_scatter_block: MPI_Reduce_scatter_block, MPI_FLOAT, MPI_SUM, size total (bytes of the whole vector: np x recvcount elements)
# reduce_scatter_block 4: skipped, no whole MPI_FLOAT for every rank
reduce_scatter_block 8 0.90 0.80 1.00
# allgather: MPI_Allgather, MPI_CHAR, size per-rank (bytes each rank contributes; the result is np times larger)
allgather 4 %.2f 0.10 9.00
check: PASS
`, ar4, ar8k, ag4)
}

func TestParse(t *testing.T) {
	r, err := parse([]byte(canned(0.25, 3.5, 0.5)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.pattern, "MPI_Barrier before every call") {
		t.Errorf("pattern %q", r.pattern)
	}
	if got := strings.Join(r.colls, ","); got != "allreduce,reduce_scatter,reduce_scatter_block,allgather" {
		t.Errorf("collectives %s", got)
	}
	if h := r.heads["allgather"]; h != (head{"MPI_Allgather", "MPI_CHAR", "per-rank"}) {
		t.Errorf("allgather head %+v", h)
	}
	if h := r.heads["reduce_scatter"]; h != (head{"MPI_Reduce_scatter", "MPI_FLOAT", "total"}) {
		t.Errorf("reduce_scatter head %+v", h)
	}
	want := map[key]float64{
		{"allreduce", 4}: 0.25, {"allreduce", 8192}: 3.5, {"reduce_scatter", 4}: 0.7,
		{"reduce_scatter_block", 8}: 0.9, {"allgather", 4}: 0.5,
	}
	if len(r.us) != len(want) {
		t.Errorf("%d times, want %d: %v", len(r.us), len(want), r.us)
	}
	for k, v := range want {
		if r.us[k] != v {
			t.Errorf("%v: %v, want %v (the avg column)", k, r.us[k], v)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"no header":            "allreduce 4 0.25 0.1 0.3\n",
		"unannounced":          strings.Replace(canned(1, 1, 1), "allgather 4 ", "alltoall 4 ", 1),
		"bad number":           strings.Replace(canned(1, 1, 1), "reduce_scatter 4 0.70", "reduce_scatter 4 x", 1),
		"header without times": "# collbench: MPI_Barrier before every call\n",
	} {
		if _, err := parse([]byte(out)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func configsNamed(names ...string) []config {
	var cs []config
	for _, n := range names {
		cs = append(cs, config{name: n})
	}
	return cs
}

// fed returns the runs of configs at np after two repetitions of canned
// output, in alternating order, with times[config][repetition] its
// allreduce 4 B, allreduce 8 KiB and allgather 4 B times.
func fed(t *testing.T, np int, configs []config, times map[string][2][3]float64) *runs {
	t.Helper()
	rs := newRuns(np, 2, configs)
	for rep := range 2 {
		for _, c := range order(configs, rep) {
			v := times[c.name][rep]
			r, err := parse([]byte(canned(v[0], v[1], v[2])))
			if err != nil {
				t.Fatal(err)
			}
			if err := rs.add(c.name, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return rs
}

var five = configsNamed("gocoll", "openmpi", "mpich", "openmpi+preload", "mpich+preload")

// TestReport feeds two repetitions of every configuration and checks the
// table: the lowest of the repetitions, gocoll over the faster host, each
// preload over its host, what was measured and the oversubscription.
func TestReport(t *testing.T) {
	rs := fed(t, 8, five, map[string][2][3]float64{ // config: repetition: allreduce 4, 8192, allgather 4
		"gocoll":          {{0.60, 5.0, 0.40}, {0.50, 6.0, 0.45}},
		"openmpi":         {{0.40, 4.0, 0.30}, {0.45, 4.5, 0.20}},
		"mpich":           {{0.80, 2.0, 0.35}, {0.90, 2.5, 0.25}},
		"openmpi+preload": {{0.44, 4.4, 0.22}, {0.50, 4.0, 0.30}},
		"mpich+preload":   {{1.60, 2.2, 0.25}, {1.70, 3.0, 0.50}},
	})
	var b bytes.Buffer
	report(&b, rs, 2)
	out := b.String()
	for _, want := range []string{
		"np=8, oversubscribed (2 cores): the lowest of 2 repetitions",
		"collbench: MPI_Barrier before every call, only the call timed; 1000 calls",
		"MPI_Allgather, MPI_CHAR, bytes per rank",
		"MPI_Allreduce, MPI_FLOAT, bytes of the whole vector",
		"MPI_Reduce_scatter, MPI_FLOAT, bytes of the whole vector",
		"gocoll/best-host",
		"ompi+preload/ompi",
		"mpich+preload/mpich",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// bytes, the five lowest times, gocoll/best-host, the two preload ratios.
	rows := map[string]string{
		"allreduce 4":    "4 0.50 0.40 0.80 0.44 1.60 1.25 1.10 2.00",
		"allreduce 8192": "8192 5.00 4.00 2.00 4.00 2.20 2.50 1.00 1.10",
		"allgather 4":    "4 0.40 0.20 0.25 0.22 0.25 2.00 1.10 1.00",
	}
	section := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "MPI_") {
			section = strings.ToLower(strings.TrimPrefix(strings.Split(line, ",")[0], "MPI_"))
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		k := section + " " + f[0]
		if want, ok := rows[k]; ok {
			if got := strings.Join(f, " "); got != want {
				t.Errorf("%s: row %q, want %q", k, got, want)
			}
			delete(rows, k)
		}
	}
	for k := range rows {
		t.Errorf("report has no row for %s:\n%s", k, out)
	}
	if strings.Contains(report2(rs, 8), "oversubscribed") {
		t.Errorf("np=8 on 8 cores reported as oversubscribed")
	}

	var csv bytes.Buffer
	csvRows(&csv, rs, nil)
	if !strings.Contains(csv.String(), "8,gocoll,allreduce,MPI_FLOAT,total,4,0.500,0.550\n") ||
		!strings.Contains(csv.String(), "8,mpich+preload,allgather,MPI_CHAR,per-rank,4,0.250,0.375\n") {
		t.Errorf("csv rows:\n%s", csv.String())
	}
}

func report2(rs *runs, cores int) string {
	var b bytes.Buffer
	report(&b, rs, cores)
	return b.String()
}

// A configuration that measured differently (another pattern, datatype or
// size meaning) cannot enter the same table.
func TestRunsRefuseOtherHeaders(t *testing.T) {
	base := canned(1, 1, 1)
	for name, other := range map[string]string{
		"datatype": strings.Replace(base, "MPI_Allgather, MPI_CHAR,", "MPI_Allgather, MPI_DOUBLE,", 1),
		"size":     strings.Replace(base, "size per-rank", "size total", 1),
		"pattern":  strings.Replace(base, "1000 calls", "50 calls", 1),
	} {
		rs := newRuns(2, 1, five)
		r0, _ := parse([]byte(base))
		r1, err := parse([]byte(other))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := rs.add("gocoll", r0); err != nil {
			t.Fatal(err)
		}
		if err := rs.add("openmpi", r1); err == nil {
			t.Errorf("%s: a run with another %s was added", name, name)
		}
	}
}

// Repetitions alternate the configurations' order: forwards, backwards.
func TestOrderInterleaves(t *testing.T) {
	names := func(cs []config) string {
		var s []string
		for _, c := range cs {
			s = append(s, c.name)
		}
		return strings.Join(s, " ")
	}
	if got := names(order(five, 0)); got != "gocoll openmpi mpich openmpi+preload mpich+preload" {
		t.Errorf("repetition 1: %s", got)
	}
	if got := names(order(five, 1)); got != "mpich+preload openmpi+preload mpich openmpi gocoll" {
		t.Errorf("repetition 2: %s", got)
	}
	if got := names(order(five, 2)); got != names(order(five, 0)) {
		t.Errorf("repetition 3: %s", got)
	}
}
