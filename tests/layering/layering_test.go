// Package layering keeps gocoll's leaves leaves (DESIGN.md, "Layers"). It
// has only a test, which reads `go list` and needs nothing built.
package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gocoll/gocoll/"

// may lists, for each family of leaves (a top-level folder: ops is ops
// and everything under it), the other families its packages may import;
// a family may always import its own (gpu its test doubles under
// gpu/gputest, transport its transporttest). Everything else of gocoll
// is above the leaves: the configuration (envvar), the dispatch (coll),
// the front ends, the executors, the tools.
var may = map[string][]string{
	"schedule":   nil,
	"mpierr":     nil,
	"internal":   nil,
	"ops":        {"internal"},
	"gpu":        {"ops", "internal"}, // gpu's kernels name ops' ops and types
	"algorithms": {"schedule", "ops", "internal"},
	"transport":  {"bootstrap", "internal"},
	"bootstrap":  {"internal"},
}

// xtestMay lists what a family's external tests (package x_test) may
// import besides: algorithms' run the schedules they check on the
// executors, over transport/inproc.
var xtestMay = map[string][]string{
	"algorithms": {"executor", "transport"},
}

// contexts are the builds whose imports are read: this machine's (linux,
// amd64, cgo), and one that takes the other side of the repository's build
// constraints (not linux, not amd64, no cgo, purego, gocolltest).
var contexts = []struct {
	env  []string
	tags string
}{
	{nil, ""},
	{[]string{"GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0"}, "purego,gocolltest"},
}

// No leaf imports a gocoll package above it: not in its code, not in its
// tests (whose files build into the package, or, for package x_test,
// beside it), with the exceptions of xtestMay. A failure names the
// package, the import, and what the package may import.
func TestLeavesImportNothingAbove(t *testing.T) {
	root := moduleRoot(t)
	var bad []string
	for _, c := range contexts {
		for _, p := range list(t, root, c.env, c.tags) {
			fam := family(p.ImportPath)
			allowed, leaf := may[fam]
			if !leaf {
				continue
			}
			for _, imp := range []struct {
				what  string
				paths []string
				also  []string
			}{{"", p.Imports, nil}, {" in its tests", p.TestImports, nil}, {" in its external tests", p.XTestImports, xtestMay[fam]}} {
				for _, path := range imp.paths {
					to, ok := strings.CutPrefix(path, module)
					if !ok || family(to) == fam || slices.Contains(allowed, family(to)) || slices.Contains(imp.also, family(to)) {
						continue
					}
					bad = append(bad, fmt.Sprintf("%s imports %s%s (%s/... may import only %s)", p.ImportPath, to, imp.what, fam, allowedNames(fam, slices.Concat(allowed, imp.also))))
				}
			}
		}
	}
	slices.Sort(bad)
	for _, b := range slices.Compact(bad) {
		t.Error(b)
	}
}

// family is the top-level folder of a package path within the module.
func family(path string) string {
	f, _, _ := strings.Cut(path, "/")
	return f
}

func allowedNames(fam string, others []string) string {
	names := []string{fam + "/..."}
	for _, o := range others {
		names = append(names, o+"/...")
	}
	return strings.Join(names, ", ")
}

// pkg is what `go list -json` says of a package, less the module prefix
// of its own path.
type pkg struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

// list runs `go list` on every package of the module in the build context
// that env (added to this process's) and tags describe.
func list(t *testing.T, root string, env []string, tags string) []pkg {
	t.Helper()
	args := []string{"list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Dir, cmd.Env, cmd.Stderr = root, append(os.Environ(), env...), new(strings.Builder)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s (%s): %v\n%s", strings.Join(args, " "), strings.Join(env, " "), err, cmd.Stderr)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list in %s found no packages", root)
	}
	return pkgs
}

// moduleRoot is the folder of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: %q, %v", gomod, err)
	}
	return filepath.Dir(gomod)
}
