package tests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// panicRE finds a Go panic, a runtime crash or an internal error in a
// program's output: none may reach the user on bad input.
var panicRE = regexp.MustCompile(`panic:|goroutine \d+ \[|SIGSEGV|fatal error:|internal error`)

// The C ABI fuzzer (tests/fuzz/abifuzz.c) over the whole exported subset:
// bad input of every kind against every call, at 1 and 3 ranks, with two
// seeds; each rank judges itself and exits non-zero on a failure, and
// gocollrun's exit status combines the ranks.
func TestABIFuzz(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/fuzz/abifuzz.c", "abifuzz")
	for _, c := range []struct {
		n    int
		seed string
	}{{1, "1"}, {3, "1"}, {3, "0x5eed"}} {
		what := fmt.Sprintf("abifuzz at %d ranks, seed %s", c.n, c.seed)
		out, code := run(t, 2*time.Minute, nil, gocollrun(c.n, bin, "-seed", c.seed, "-random", "3000")...)
		expectCounts(t, what, out, code)
		if got := len(regexp.MustCompile(`(?m)^\d+ passed, 0 failed$`).FindAllString(out, -1)); got != c.n {
			t.Errorf("%s: %d ranks reported, want %d:\n%s", what, got, c.n, out)
		}
		if m := panicRE.FindString(out); m != "" {
			t.Errorf("%s: %q in the output:\n%s", what, m, out)
		}
	}
}

// Calls before MPI_Init and after MPI_Finalize, each in a process of its
// own (abifuzz lifecycle starts them and judges how they end: the error
// class as exit status, a message naming the call, no panic).
func TestABIFuzzLifecycle(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/fuzz/abifuzz.c", "abifuzz")
	out, code := run(t, 2*time.Minute, nil, bin, "lifecycle")
	expectCounts(t, "abifuzz lifecycle", out, code)
}

// Every function that libgocoll.so and libgocoll-preload.so export to C
// recovers from panics: it defers guard (capi) or a function that calls
// recover (preload), or it returns the result of a function of its
// package that does. A new export without one fails here.
func TestExportsAreGuarded(t *testing.T) {
	for _, dir := range []string{"capi", "preload"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(harness.Root, dir), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		funcs := map[string]*ast.FuncDecl{}
		var exports []string
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, d := range f.Decls {
					fd, ok := d.(*ast.FuncDecl)
					if !ok || fd.Recv != nil {
						continue
					}
					funcs[fd.Name.Name] = fd
					if fd.Doc != nil {
						for _, c := range fd.Doc.List {
							if strings.HasPrefix(c.Text, "//export ") {
								exports = append(exports, fd.Name.Name)
							}
						}
					}
				}
			}
		}
		if len(exports) == 0 {
			t.Fatalf("%s: no exported functions found", dir)
		}
		sort.Strings(exports)
		var bad []string
		for _, name := range exports {
			if !guarded(funcs, funcs[name], 0) {
				bad = append(bad, name)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s: exported without recovering from panics: %v", dir, bad)
		} else {
			t.Logf("%s: %d exports, all guarded", dir, len(exports))
		}
	}
}

// guarded reports whether fd recovers from panics (see
// TestExportsAreGuarded).
func guarded(funcs map[string]*ast.FuncDecl, fd *ast.FuncDecl, depth int) bool {
	if fd == nil || fd.Body == nil || depth > 3 {
		return false
	}
	for _, st := range fd.Body.List {
		d, ok := st.(*ast.DeferStmt)
		if !ok {
			continue
		}
		if id, ok := d.Call.Fun.(*ast.Ident); ok && id.Name == "guard" {
			return true
		}
		if lit, ok := d.Call.Fun.(*ast.FuncLit); ok && callsRecover(lit.Body) {
			return true
		}
	}
	// A forwarder: its only statement returns a call of a guarded
	// function (capi's forwarders pass conversions, comparisons and
	// closures, which run inside the callee: nothing that can panic
	// before its guard).
	if len(fd.Body.List) == 1 {
		if r, ok := fd.Body.List[0].(*ast.ReturnStmt); ok && len(r.Results) == 1 {
			if call, ok := r.Results[0].(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok {
					return guarded(funcs, funcs[id.Name], depth+1)
				}
			}
		}
	}
	return false
}

func callsRecover(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "recover" {
				found = true
			}
		}
		return !found
	})
	return found
}
