package provenance

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"build/bin/gocoll-compare", "-np", "2", "-plot", "results/compare"}, "build/bin/gocoll-compare -np 2 -plot results/compare"},
		{[]string{"go", "test", "-bench", "Kernel|Memmove", "./ops/"}, "go test -bench 'Kernel|Memmove' ./ops/"},
		{[]string{"x", "it's", ""}, `x 'it'\''s' ''`},
	} {
		if got := CommandLine(c.argv); got != c.want {
			t.Errorf("CommandLine(%q) = %s, want %s", c.argv, got, c.want)
		}
	}
}

func TestCommentParses(t *testing.T) {
	h := Header{Command: "gocoll-halferr -n 20000", Commit: "b79d464-dirty", Machine: "AMD EPYC, 2 cores", Date: "2026-12-03 10:00 UTC"}
	text := h.Comment() + "\n# float16 and bfloat16 MPI_SUM\nformat p\n"
	got, rest, ok := Parse(text)
	if !ok || got != h {
		t.Errorf("Parse: %+v %v, want %+v", got, ok, h)
	}
	if rest != "# float16 and bfloat16 MPI_SUM\nformat p\n" {
		t.Errorf("rest %q: the header and one blank line should go, the file's own comments stay", rest)
	}
	if Strip(text) != rest {
		t.Error("Strip differs from Parse's rest")
	}
	// A CSV's header: no blank line after it.
	csv := h.Comment() + "np,config\n2,gocoll\n"
	if _, rest, ok := Parse(csv); !ok || rest != "np,config\n2,gocoll\n" {
		t.Errorf("CSV rest %q", rest)
	}
	// No header: nothing taken, comments that are not fields included.
	for _, s := range []string{"np,config\n", "# gocoll-model regret\n# commit: x\n", ""} {
		if _, rest, ok := Parse(s); ok || rest != s {
			t.Errorf("Parse(%q) found a header", s)
		}
	}
	// A field twice ends the header.
	if got, _, _ := Parse("# commit: a\n# commit: b\n"); got.Commit != "a" {
		t.Errorf("commit %q", got.Commit)
	}
}

func TestSVG(t *testing.T) {
	svg := []byte("<?xml version=\"1.0\"?>\n<svg></svg>\n")
	from := Header{Command: "gocoll-compare -np 2", Commit: "not recorded"}
	h := Header{Command: "gocoll-compare -replot a--b.csv", Commit: "c"}.From("results/compare-np2.csv", from)
	out := string(SVG(svg, h))
	if !strings.HasPrefix(out, "<?xml version=\"1.0\"?>\n<!--\n") || !strings.HasSuffix(out, "-->\n<svg></svg>\n") {
		t.Errorf("comment not between the declaration and the svg:\n%s", out)
	}
	for _, want := range []string{"command: gocoll-compare -replot a- -b.csv", "data: results/compare-np2.csv, made by: command: gocoll-compare -np 2; commit: not recorded"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestMarkdown(t *testing.T) {
	got := Header{Command: "go run ./preload/tune -np 2", Commit: "x"}.Markdown()
	if got != "- command: `go run ./preload/tune -np 2`\n- commit: x\n\n" {
		t.Errorf("%q", got)
	}
}

func TestMachine(t *testing.T) {
	m := Machine()
	if !strings.Contains(m, " cores") {
		t.Errorf("machine %q has no core count", m)
	}
	if runtime.GOOS == "linux" && !strings.Contains(m, "linux ") {
		t.Errorf("machine %q has no kernel", m)
	}
	if !strings.Contains(Machine("nosuchmpi"), "nosuchmpi (version not recorded)") {
		t.Error("an unknown MPI is not said to be unknown")
	}
}

// In this checkout Commit names a commit; dirty or not, it is no
// sentence. Outside one it says so.
func TestCommit(t *testing.T) {
	if c := Commit(""); c == "" || strings.Contains(c, " ") {
		if _, err := exec.LookPath("git"); err == nil {
			t.Errorf("commit %q", c)
		}
	}
	if c := Commit(t.TempDir()); !strings.HasPrefix(c, "not recorded: not run in a git checkout") {
		t.Errorf("outside a checkout: %q", c)
	}
}
