package docs

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/internal/provenance"
)

// results are the measurement files, beside their README.
func results(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob("../results/*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range all {
		if filepath.Base(f) != "README.md" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Fatal("no results/")
	}
	return out
}

// Every measurement file is headed by the command, the commit and the
// machine that produced it, in its format's way (internal/provenance).
func TestResultsHaveProvenance(t *testing.T) {
	for _, f := range results(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var h provenance.Header
		ok := false
		switch filepath.Ext(f) {
		case ".txt", ".csv":
			h, _, ok = provenance.Parse(string(b))
		case ".md":
			var lines []string
			for _, l := range strings.SplitAfter(string(b), "\n") {
				if !strings.HasPrefix(l, "- ") {
					break
				}
				lines = append(lines, "# "+strings.Replace(strings.TrimPrefix(l, "- "), "`", "", 2))
			}
			h, _, ok = provenance.Parse(strings.Join(lines, ""))
		case ".json":
			var v map[string]json.RawMessage
			if err := json.Unmarshal(b, &v); err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			raw := v["provenance"]
			if raw == nil {
				raw = v["Provenance"]
			}
			ok = raw != nil && json.Unmarshal(raw, &h) == nil
		case ".svg":
			_, rest, _ := bytes.Cut(b, []byte("?>\n"))
			comment, _, found := bytes.Cut(rest, []byte("-->"))
			if found && bytes.HasPrefix(comment, []byte("<!--\n")) {
				var lines []string
				for _, l := range strings.Split(string(comment[5:]), "\n") {
					if l = strings.TrimSpace(l); l != "" {
						lines = append(lines, "# "+l+"\n")
					}
				}
				h, _, ok = provenance.Parse(strings.Join(lines, ""))
			}
		default:
			t.Errorf("%s: not a kind of result this test knows", f)
			continue
		}
		if !ok || h.Command == "" || h.Commit == "" || h.Machine == "" {
			t.Errorf("%s: no header of command, commit and machine (got %+v)", f, h)
		}
	}
}

// results/README.md names every file there, and docs/ holds pages only.
func TestResultsListed(t *testing.T) {
	readme, err := os.ReadFile("../results/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range results(t) {
		if !bytes.Contains(readme, []byte(filepath.Base(f))) {
			t.Errorf("results/README.md does not name %s", filepath.Base(f))
		}
	}
	here, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range here {
		if ext := filepath.Ext(f); ext != ".md" && ext != ".go" {
			t.Errorf("docs/%s: measurements belong in results/ (with a header)", f)
		}
	}
}
