// Package docs holds gocoll's documentation pages; its tests check that
// every relative link in them, in the README and in results/'s markdown
// (the measurements the pages link to and show) leads somewhere, and
// (results_test.go) that every file in results/ is headed by what made it
// and listed in results/README.md.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	linkRE    = regexp.MustCompile(`\]\(([^()\s]*)\)`)
	codeRE    = regexp.MustCompile("`[^`]*`")
	headingRE = regexp.MustCompile(`^#{1,6} +(.*?) *#*$`)
	// GitHub keeps letters, digits, spaces, - and _ of a heading's text.
	dropRE = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchor is GitHub's anchor for a heading's text: lowercase, punctuation
// but - and _ dropped, spaces made -.
func anchor(heading string) string {
	return strings.ReplaceAll(dropRE.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
}

// blocks returns page's lines with its code blocks (fenced and indented)
// blanked.
func blocks(page string) []string {
	var out []string
	fence, prevBlank, inIndented := false, true, false
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			out = append(out, "")
			continue
		}
		blank := strings.TrimSpace(l) == ""
		indented := strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t")
		inIndented = indented && (prevBlank || inIndented)
		if fence || inIndented {
			l = ""
		}
		out = append(out, l)
		prevBlank = blank
	}
	return out
}

// prose returns page's lines with all code blanked, inline spans too, so
// that code that looks like a link is not taken for one.
func prose(page string) []string {
	// A code span may run over a line break.
	return strings.Split(codeRE.ReplaceAllStringFunc(strings.Join(blocks(page), "\n"), func(s string) string {
		return strings.Repeat("\n", strings.Count(s, "\n"))
	}), "\n")
}

// anchors returns the anchors of page's headings, numbered as GitHub
// numbers repeated ones (-1, -2, ...). A heading's code spans count.
func anchors(page string) map[string]bool {
	got, seen := map[string]bool{}, map[string]int{}
	for _, l := range blocks(page) {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			got[a+"-"+strconv.Itoa(n)] = true
		} else {
			got[a] = true
		}
		seen[a]++
	}
	return got
}

// broken returns, for the markdown file at path, each relative link whose
// file does not exist or whose #anchor is no heading of its target.
func broken(path string) ([]string, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var bad []string
	for i, l := range prose(string(text)) {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			where := path
			if file != "" {
				where = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(where); err != nil {
					bad = append(bad, path+":"+strconv.Itoa(i+1)+": "+target+": no such file")
					continue
				}
			}
			if frag == "" {
				continue
			}
			page, err := os.ReadFile(where)
			if err != nil || !strings.HasSuffix(where, ".md") {
				bad = append(bad, path+":"+strconv.Itoa(i+1)+": "+target+": an anchor into a file that is not markdown")
				continue
			}
			if !anchors(string(page))[frag] {
				bad = append(bad, path+":"+strconv.Itoa(i+1)+": "+target+": no such heading")
			}
		}
	}
	return bad, nil
}

func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	results, err := filepath.Glob("../results/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(append(pages, "../README.md"), results...)
	for _, p := range pages {
		bad, err := broken(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Error(b)
		}
	}
}

// The README's Documentation list links every page.
func TestEveryPageIsLinked(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range prose(string(readme)) {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			file, _, _ := strings.Cut(m[1], "#")
			linked[file] = true
		}
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if !linked["docs/"+p] {
			t.Errorf("README.md links no docs/%s", p)
		}
	}
}

// The checker itself must see a missing file, a missing heading and a
// repeated heading's number, and must not read code as links.
func TestCheckerFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.md", "# Page B\n\n## Tuning on a cluster: `make` (v2)\n\n## Notes\n\n## Notes\n")
	// A page links and shows measurements in a folder beside its own,
	// as docs/ does results/.
	if err := os.Mkdir(filepath.Join(dir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("results/x.csv", "# command: x\n")
	write("a.md", "# A\n\n"+
		"[ok](b.md) [ok](b.md#tuning-on-a-cluster-make-v2) [ok](b.md#notes-1) [ok](#a)\n"+
		"[ok](results/x.csv) ![ok](results/x.csv)\n"+
		"[bad](c.md) [bad](b.md#notes-2) [bad](#nowhere) ![bad](results/y.svg) [bad](results/x.csv#top)\n"+
		"`[code](nowhere.md)`\n\n    [code](nowhere.md)\n\n```\n[code](nowhere.md)\n```\n")
	bad, err := broken(filepath.Join(dir, "a.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c.md: no such file", "b.md#notes-2: no such heading", "#nowhere: no such heading",
		"results/y.svg: no such file", "results/x.csv#top: an anchor into a file that is not markdown"}
	if len(bad) != len(want) {
		t.Fatalf("broken links found: %q, want %d ending in %q", bad, len(want), want)
	}
	for i, w := range want {
		if !strings.HasSuffix(bad[i], w) {
			t.Errorf("broken link %d: %q, want one ending in %q", i, bad[i], w)
		}
	}
}
