// Package cmdhelp writes every gocoll command's --help in one shape, the
// shape tools/man.sh turns into the command's man page:
//
//	NAME - SUMMARY
//
//	usage: SYNOPSIS
//	       SYNOPSIS
//
//	ABOUT (paragraphs)
//
//	flags:
//	  the flag set's defaults
//
// Asked for (-h, -help, --help) the help goes to standard output and the
// command exits 0, as GNU tools do; shown for a wrong flag it goes to
// standard error with the flag package's message. Every command also
// takes -version (gocoll's version, internal/version).
package cmdhelp

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gocoll/gocoll/internal/version"
)

// Help is what a command says about itself.
type Help struct {
	Name    string   // the command: gocoll-bench
	Summary string   // one line, the man page's NAME: "times gocoll's collectives"
	Usage   []string // the synopsis lines, each without "usage: "
	About   string   // plain-text paragraphs; may be empty
}

// Write writes the help, then fs's flags when it has any.
func (h Help) Write(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s - %s\n\n", h.Name, h.Summary)
	for i, u := range h.Usage {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		fmt.Fprintf(w, "%s%s\n", lead, u)
	}
	if about := strings.TrimSpace(h.About); about != "" {
		fmt.Fprintf(w, "\n%s\n", about)
	}
	if fs == nil {
		return
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprint(w, "\nflags:\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// Set makes h the usage of fs, parsed from args: on standard output when
// args ask for help, else on fs's output (standard error by default).
// It adds -version, which prints "NAME (gocoll VERSION)" and exits 0.
func (h Help) Set(fs *flag.FlagSet, args []string) {
	w := fs.Output()
	if Asked(fs, args) {
		w = os.Stdout
	}
	fs.Usage = func() { h.Write(w, fs) }
	fs.BoolFunc("version", "print gocoll's version and exit", func(string) error {
		fmt.Println(h.VersionLine())
		os.Exit(0)
		return nil
	})
}

// VersionLine is what -version prints.
func (h Help) VersionLine() string {
	return fmt.Sprintf("%s (gocoll %s)", h.Name, version.Version)
}

// Asked reports whether args, parsed by fs, ask for help: -h, -help or
// --help before the first argument that is not a flag (one after a
// program name is that program's).
func Asked(fs *flag.FlagSet, args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-h" || a == "-help" || a == "--help" || a == "--h":
			return true
		case a == "--" || a == "-" || !strings.HasPrefix(a, "-"):
			return false
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++ // its value
			}
		}
	}
	return false
}
