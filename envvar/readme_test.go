package envvar_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/preload/native"
)

// The reference lives in docs/tuning.md (the README links it).
const tuningPage = "../docs/tuning.md"

// section returns the lines of page from the heading "## name" up to the
// next heading of level 2 or higher.
func section(t *testing.T, page, name string) []string {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in := false
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(l, "# ") || strings.HasPrefix(l, "## ") {
			in = l == "## "+name
			continue
		}
		if in {
			lines = append(lines, l)
		}
	}
	if lines == nil {
		t.Fatalf("%s has no section %q", page, name)
	}
	return lines
}

// cells splits a markdown table row into its trimmed cells; nil for a
// line that is not a row.
func cells(line string) []string {
	if !strings.HasPrefix(line, "|") {
		return nil
	}
	cs := strings.Split(strings.Trim(line, "|"), "|")
	for i := range cs {
		cs[i] = strings.TrimSpace(cs[i])
	}
	return cs
}

// Every variable has its row in the Environment variables table.
func TestEveryVariableIsDocumented(t *testing.T) {
	rows := map[string]bool{}
	for _, l := range section(t, tuningPage, "Environment variables") {
		if cs := cells(l); len(cs) >= 3 {
			rows[cs[0]] = true
		}
	}
	for _, v := range envvar.All {
		if !rows["`"+v.Name+"`"] {
			t.Errorf("%s: the Environment variables table has no row for %s", tuningPage, v.Name)
		}
	}
}

// Every algorithm has its row in the Algorithms table, under its collective
// ("Reduce_scatter(_block)" covers both reduce-scatters, "Allgather(v)" the
// allgather, "all four" every collective).
func TestEveryAlgorithmIsListed(t *testing.T) {
	listed := map[string][]string{} // algorithm -> first cells of its rows
	for _, l := range section(t, tuningPage, "Algorithms") {
		if cs := cells(l); len(cs) >= 2 && strings.HasPrefix(cs[1], "`") {
			name := strings.Trim(cs[1], "`")
			listed[name] = append(listed[name], cs[0])
		}
	}
	covers := func(row string, c algorithms.Collective) bool {
		row = strings.ToLower(strings.NewReplacer("(", "", ")", "").Replace(row))
		return row == "all four" || strings.HasPrefix(row, strings.ToLower(strings.TrimPrefix(c.String(), "MPI_")))
	}
	for _, c := range algorithms.Collectives {
		for _, name := range algorithms.Names(c) {
			found := false
			for _, row := range listed[name] {
				found = found || covers(row, c)
			}
			if !found {
				t.Errorf("%s: the Algorithms table has no row for %s algorithm %s", tuningPage, c, name)
			}
		}
	}
}

// envvar cannot import the preload (it imports the tuner, which imports
// envvar): its copy of the native candidate's name must stay the same.
func TestNativeName(t *testing.T) {
	if envvar.Native != native.Name {
		t.Errorf("envvar.Native = %q, preload/native.Name = %q", envvar.Native, native.Name)
	}
}
