package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExpandHostList(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want string // the hosts, or "error: <part of the message>"
	}{
		{"node1", "node1"},
		{"a,b , c", "a b c"},
		{"node[01-03,07]", "node01 node02 node03 node07"},
		{"node[8-10]", "node8 node9 node10"},
		{"node[008-010]", "node008 node009 node010"},
		{"node[01-16,20]", "node01 node02 node03 node04 node05 node06 node07 node08 node09 node10 node11 node12 node13 node14 node15 node16 node20"},
		{"a[1-2]-ib,b", "a1-ib a2-ib b"},
		{"r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2"},
		{"x[3]", "x3"},
		{"[1-2]", "1 2"},
		{"", "error: empty host name"},
		{"a,,b", "error: empty host name"},
		{"node[1-3", "error: '[' without ']'"},
		{"node1-3]", "error: ']' without '['"},
		{"node[[1]]", "error: nested"},
		{"node[3-1]", "error: runs backwards"},
		{"node[a-b]", "error: not a number"},
		{"node[1-]", "error: not a number"},
		{"node[]", "error: not a number"},
		{"node[1,,2]", "error: not a number"},
		{"node[-1]", "error: not a number"},
		{"node[1-100000000]", "error: more than"},
		{"a b", "error: bad host name"},
	} {
		got, err := expandHostList(tc.spec)
		if msg, ok := strings.CutPrefix(tc.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), tc.spec) {
				t.Errorf("expandHostList(%q) = %v, %v; want an error naming the list and %q", tc.spec, got, err, msg)
			}
			continue
		}
		if err != nil || !slices.Equal(got, strings.Fields(tc.want)) {
			t.Errorf("expandHostList(%q) = %v, %v; want %s", tc.spec, got, err, tc.want)
		}
	}
}

func TestParseHosts(t *testing.T) {
	got, err := parseHosts("a:2,node[1-2]:3,b,c[01-02]-ib")
	want := []hostEntry{{"a", 2}, {"node1", 3}, {"node2", 3}, {"b", 0}, {"c01-ib", 0}, {"c02-ib", 0}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseHosts = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"h1:x", "h1:0", ":2", "h1:", "a[1-2]x:y", "a[2-1]:2"} {
		if got, err := parseHosts(bad); err == nil {
			t.Errorf("parseHosts(%q) = %v, want an error", bad, got)
		}
	}
}

func TestReadHostfile(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "hosts")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := readHostfile(write("# the cluster\n\nh1 slots=2\n  h2:3   # fast one\nnode[01-02]\nn[1-2] slots=4\n"))
	want := []hostEntry{{"h1", 2}, {"h2", 3}, {"node01", 0}, {"node02", 0}, {"n1", 4}, {"n2", 4}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("readHostfile = %v, %v; want %v", got, err, want)
	}
	for text, msg := range map[string]string{
		"h1 slots=x\n":       "line 1",
		"h1\nh2 cpus=2\n":    "line 2",
		"h1:2 slots=2\n":     "slots given twice",
		"a,b\n":              "one host per line",
		"# nothing\n\n":      "names no host",
		"node[1-\n":          "line 1",
		"h1 slots=0\n":       "line 1",
		"ok\nbad[3-1] x=1\n": "line 2",
	} {
		got, err := readHostfile(write(text))
		if err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "--hostfile") {
			t.Errorf("hostfile %q: %v, %v; want an error with %q", text, got, err, msg)
		}
	}
	if _, err := readHostfile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing hostfile: %v", err)
	}
}

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		n     int
		mapBy string
		want  string // hosts of ranks 0..n-1, or "error"
	}{
		{"", 3, "slot", "localhost localhost localhost"},
		{"h1,h2", 4, "slot", "h1 h1 h2 h2"},
		{"h1,h2", 5, "slot", "h1 h1 h1 h2 h2"},
		{"h1,h2,h3", 2, "slot", "h1 h2"},
		{"h1:2,h2:2", 4, "slot", "h1 h1 h2 h2"},
		{"h1:2,h2:2", 3, "slot", "h1 h1 h2"},
		{"h1:3,h2", 4, "slot", "h1 h1 h1 h2"},
		{"localhost:1,fake:2", 3, "slot", "localhost fake fake"},
		{"h1:2,h2:2", 5, "slot", "error"},
		{"h1,h2", 5, "node", "h1 h2 h1 h2 h1"},
		{"h[1-3]", 4, "node", "h1 h2 h3 h1"},
		{"h1:2,h2:2", 4, "node", "h1 h2 h1 h2"},
		{"h1:3,h2:1", 4, "node", "h1 h2 h1 h1"},
		{"h1:1,h2:3", 3, "node", "h1 h2 h2"},
		{"h1:2,h2:2", 5, "node", "error"},
		{"h1,h2", 2, "core", "error"},
	} {
		hosts, err := parseHosts(tc.spec)
		if tc.spec == "" {
			hosts, err = nil, nil
		}
		if err != nil {
			t.Fatalf("parseHosts(%q): %v", tc.spec, err)
		}
		got, err := place(hosts, tc.n, tc.mapBy)
		if tc.want == "error" {
			if err == nil {
				t.Errorf("place(%q, %d, %s) = %v, want an error", tc.spec, tc.n, tc.mapBy, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, strings.Fields(tc.want)) {
			t.Errorf("place(%q, %d, %s) = %v, %v; want %s", tc.spec, tc.n, tc.mapBy, got, err, tc.want)
		}
	}
}

func TestTasksPerNode(t *testing.T) {
	for spec, want := range map[string]string{
		"4":           "4",
		"2(x3),1":     "2 2 2 1",
		"1,8(x2),3":   "1 8 8 3",
		"":            "error",
		"2(x3":        "error",
		"2(x0)":       "error",
		"0":           "error",
		"x":           "error",
		"2(x3),,1":    "error",
		"2(3)":        "error",
		"1(x9999999)": "error",
	} {
		got, err := tasksPerNode(spec)
		if want == "error" {
			if err == nil {
				t.Errorf("tasksPerNode(%q) = %v, want an error", spec, got)
			}
			continue
		}
		var ws []int
		for _, f := range strings.Fields(want) {
			var n int
			fmt.Sscan(f, &n)
			ws = append(ws, n)
		}
		if err != nil || !slices.Equal(got, ws) {
			t.Errorf("tasksPerNode(%q) = %v, %v; want %v", spec, got, err, ws)
		}
	}
}
