// Package provenance heads every measurement file in results/ with what
// produced it: the command line as run, the commit (git describe --always
// --dirty, results/ itself aside) and the machine (CPU model, cores, memory, kernel, and the
// versions of the host MPIs where they are compared), so that a number
// can be traced to the run that made it and judged against the machine
// it came from. Every command that writes such a file (gocoll-compare,
// gocoll-bench, gocoll-tune, gocoll-model, gocoll-soak, gocoll-halferr,
// preload/tune) takes its header from here, in the form of its file:
//
//   - text tables and CSV: leading "# key: value" lines (Comment); a
//     reader of the rows skips lines that start with #, and Parse and
//     Strip take the header off;
//   - JSON: a "provenance" object beside the data (Header's fields);
//   - SVG: an XML comment after the XML declaration (SVG), naming the
//     CSV its numbers come from where it was drawn from one (From);
//   - markdown: a list ahead of the text (Markdown).
//
// tools/measure.sh heads the outputs of commands that are not gocoll's
// (go test -bench) with `go run ./internal/provenance/headed CMD...`.
package provenance

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gocoll/gocoll/internal/version"
)

// Header says what produced a measurement file. Its JSON form is the
// "provenance" object of the JSON results (tuning files among them).
type Header struct {
	Command string `json:"command"`        // the command line as run
	Commit  string `json:"commit"`         // git describe --always --dirty (see Commit), or why not
	Machine string `json:"machine"`        // CPU, cores, memory, kernel; host MPI versions
	Date    string `json:"date,omitempty"` // when, UTC
	// Data, in a file drawn or derived from another (a plot from a CSV,
	// rules from saved measurements), names that file and its header.
	Data string `json:"data,omitempty"`
}

// The host MPIs a header can name, by the names the commands use.
const (
	OpenMPI = "openmpi"
	MPICH   = "mpich"
)

// New returns the header of this process: its command line, the commit
// of the checkout at dir ("" for the working directory), this machine,
// with the version of each host MPI of mpis (OpenMPI, MPICH) it compares
// with, and the time now.
func New(dir string, mpis ...string) Header { return Of(os.Args, dir, mpis...) }

// Of is New for the command line argv.
func Of(argv []string, dir string, mpis ...string) Header {
	return Header{
		Command: CommandLine(argv),
		Commit:  Commit(dir),
		Machine: Machine(mpis...),
		Date:    time.Now().UTC().Format("2006-01-02 15:04 UTC"),
	}
}

// CommandLine is argv as a shell would take it back: each word quoted
// where it needs to be. A program started by go run (its argv[0] in the
// build cache) is written as the go run of its package.
func CommandLine(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	words := make([]string, 0, len(argv)+1)
	if run := goRun(argv[0]); run != "" {
		words = append(words, "go", "run", run)
	} else {
		words = append(words, quote(argv[0]))
	}
	for _, a := range argv[1:] {
		words = append(words, quote(a))
	}
	return strings.Join(words, " ")
}

// goRun returns "./PATH" of the main package when exe is a binary go run
// built in its cache, else "".
func goRun(exe string) string {
	if !strings.Contains(exe, "go-build") {
		return ""
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Path == "" {
		return ""
	}
	if rel, ok := strings.CutPrefix(bi.Path, bi.Main.Path+"/"); ok {
		return "./" + rel
	}
	return bi.Path
}

// quote returns s as one shell word.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Commit is `git describe --always --dirty` of the checkout at dir (""
// for the working directory), except that changes under results/ do not
// make it dirty: tools/measure.sh writes one result after another there,
// and the second would otherwise name the code the first changed nothing
// of "-dirty". Outside a checkout it is a sentence that says so and names
// gocoll's version.
func Commit(dir string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	c, err := git("describe", "--always")
	if err != nil || c == "" {
		return "not recorded: not run in a git checkout (gocoll " + version.Version + ")"
	}
	if st, err := git("status", "--porcelain", "--untracked-files=no", "--", ":/", ":(top,exclude)results"); err != nil || st != "" {
		c += "-dirty"
	}
	return c
}

// Machine describes this machine: CPU model, cores, memory, kernel, and
// the version of each host MPI of mpis.
func Machine(mpis ...string) string {
	parts := []string{CPUModel(), fmt.Sprintf("%d cores", runtime.NumCPU())}
	if m := memTotal(); m != "" {
		parts = append(parts, m)
	}
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		parts = append(parts, runtime.GOOS+" "+strings.TrimSpace(string(k)))
	} else {
		parts = append(parts, runtime.GOOS+"/"+runtime.GOARCH)
	}
	s := strings.Join(parts, ", ")
	var vs []string
	for _, m := range mpis {
		vs = append(vs, MPIVersion(m))
	}
	if len(vs) > 0 {
		s += "; " + strings.Join(vs, ", ")
	}
	return s
}

// CPUModel is /proc/cpuinfo's first model name.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "CPU model not recorded (" + runtime.GOARCH + ")"
}

// memTotal is /proc/meminfo's MemTotal in GiB, or "".
func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				return fmt.Sprintf("%.1f GiB memory", kb/(1<<20))
			}
		}
	}
	return ""
}

// MPIVersion is the version of host MPI name (OpenMPI, MPICH), as its
// launcher or mpichversion says, e.g. "Open MPI 4.1.4", or that it was
// not found.
func MPIVersion(name string) string {
	switch name {
	case OpenMPI:
		// "mpirun.openmpi (OpenRTE) 4.1.4"
		if out, err := exec.Command("mpirun.openmpi", "--version").Output(); err == nil {
			if f := strings.Fields(firstLine(out)); len(f) > 0 {
				return "Open MPI " + f[len(f)-1]
			}
		}
		return "Open MPI (version not found: no mpirun.openmpi --version)"
	case MPICH:
		// "MPICH Version:    	4.0.2"
		if out, err := exec.Command("mpichversion").Output(); err == nil {
			if _, v, ok := strings.Cut(firstLine(out), ":"); ok {
				return "MPICH " + strings.TrimSpace(v)
			}
		}
		return "MPICH (version not found: no mpichversion)"
	}
	return name + " (version not recorded)"
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(s)
}

// From returns h saying that its file's numbers come from the file at
// path, made as src says.
func (h Header) From(path string, src Header) Header {
	if src == (Header{}) {
		h.Data = path + " (no header)"
		return h
	}
	h.Data = path + ", made by: " + strings.Join(src.fields(), "; ")
	return h
}

// fields are the header's lines, "key: value", in order; empty values
// left out.
func (h Header) fields() []string {
	var out []string
	for _, f := range [][2]string{{"command", h.Command}, {"commit", h.Commit}, {"machine", h.Machine}, {"date", h.Date}, {"data", h.Data}} {
		if f[1] != "" {
			out = append(out, f[0]+": "+f[1])
		}
	}
	return out
}

// Comment is the header as lines that start with "# ", each ending in a
// newline: the head of a text table or a CSV file. A text table puts a
// blank line after it.
func (h Header) Comment() string {
	var b strings.Builder
	for _, l := range h.fields() {
		b.WriteString("# " + l + "\n")
	}
	return b.String()
}

// Markdown is the header as a list, ahead of a markdown file's text,
// followed by a blank line.
func (h Header) Markdown() string {
	var b strings.Builder
	for _, l := range h.fields() {
		k, v, _ := strings.Cut(l, ": ")
		if k == "command" {
			v = "`" + v + "`"
		}
		b.WriteString("- " + k + ": " + v + "\n")
	}
	return b.String() + "\n"
}

// SVG returns svg with h as an XML comment after its XML declaration
// (at its start if it has none).
func SVG(svg []byte, h Header) []byte {
	var c strings.Builder
	c.WriteString("<!--\n")
	for _, l := range h.fields() {
		c.WriteString("  " + xmlComment(l) + "\n")
	}
	c.WriteString("-->\n")
	at := 0
	if bytes.HasPrefix(svg, []byte("<?xml")) {
		if i := bytes.IndexByte(svg, '\n'); i >= 0 {
			at = i + 1
		}
	}
	out := append([]byte{}, svg[:at]...)
	out = append(out, c.String()...)
	return append(out, svg[at:]...)
}

// xmlComment keeps s from ending an XML comment.
func xmlComment(s string) string { return strings.ReplaceAll(s, "--", "- -") }

// Parse reads the header at the start of text (Comment's lines) and
// returns it with the text after it (one blank line after the header
// taken off too); ok is false, and rest is text, where text has none.
func Parse(text string) (h Header, rest string, ok bool) {
	rest = text
	for {
		line, after, found := strings.Cut(rest, "\n")
		l, isComment := strings.CutPrefix(line, "# ")
		k, v, isField := strings.Cut(l, ": ")
		if !isComment || !isField || !h.set(k, v) {
			break
		}
		ok = true
		if !found {
			return h, "", ok
		}
		rest = after
	}
	if !ok {
		return Header{}, text, false
	}
	if r, blank := strings.CutPrefix(rest, "\n"); blank {
		rest = r
	}
	return h, rest, true
}

// set sets field k to v, false for a key that is not a header field or
// is set already.
func (h *Header) set(k, v string) bool {
	var f *string
	switch k {
	case "command":
		f = &h.Command
	case "commit":
		f = &h.Commit
	case "machine":
		f = &h.Machine
	case "date":
		f = &h.Date
	case "data":
		f = &h.Data
	default:
		return false
	}
	if *f != "" {
		return false
	}
	*f = v
	return true
}

// Strip returns text without its header (see Parse).
func Strip(text string) string {
	_, rest, _ := Parse(text)
	return rest
}
