package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// options is the parsed command line.
type options struct {
	n         int
	hosts     string // --host as given: "h1,h2" or "h1:2,h2:2"
	launcher  string // template for remote ranks; %h is the host
	bind      string // address the PMI server listens on for remote ranks
	timeout   time.Duration
	tagOutput bool
	bindTo    string // core or none: pin local ranks to cores
	info      bool
	prog      []string // the program and its arguments
}

const usageText = `usage: gocollrun -n N [--host h1,h2,... | h1:2,h2:2] [--launcher 'ssh %h']
                 [--bind ADDR] [--bind-to core|none] [--timeout DUR] [--tag-output] prog [args...]
       gocollrun --info

Starts N ranks of prog and serves them PMI-1. Ranks are placed in blocks
over the hosts; those on "localhost" (all of them without --host) are
started directly, the others through the launcher template.

`

// parseOptions reads the command line (without the program name).
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("gocollrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.IntVar(&o.n, "n", 0, "number of ranks")
	fs.IntVar(&o.n, "np", 0, "same as -n")
	fs.StringVar(&o.hosts, "host", "", "hosts for the ranks, `h1,h2,...` (ranks split evenly in blocks) or h1:2,h2:2 (slots filled in order); \"localhost\" runs ranks directly")
	fs.StringVar(&o.launcher, "launcher", "ssh %h", "`command` that runs a rank on another host; %h is replaced by the host, the rank's command line is appended")
	fs.StringVar(&o.bind, "bind", "", "`address` (host or host:port) the PMI server listens on for ranks on other hosts (default: every interface, advertised by host name; a job without such ranks opens no port)")
	fs.DurationVar(&o.timeout, "timeout", 0, "kill the job after this `duration` (e.g. 90s, 5m); 0 means never")
	fs.BoolVar(&o.tagOutput, "tag-output", false, "prefix every output line with [rank]")
	fs.StringVar(&o.bindTo, "bind-to", "none", "pin local ranks: none, core (rank i on core i mod cores), or auto (core when there are no more local ranks than cores, as Open MPI does). The default is none: pinned, a rank shares its core with its Go runtime threads, which measured slower here")
	fs.BoolVar(&o.info, "info", false, "print the GOCOLL_ environment variables and the build, and exit")
	if err := fs.Parse(args); err != nil {
		return o, reportedError{err} // the flag package has printed it
	}
	o.prog = fs.Args()
	if o.info {
		return o, nil
	}
	switch {
	case o.n < 1:
		return o, errors.New("-n N (the number of ranks, at least 1) is required")
	case len(o.prog) == 0:
		return o, errors.New("no program to run")
	case o.timeout < 0:
		return o, errors.New("--timeout must not be negative")
	case o.bindTo != "auto" && o.bindTo != "core" && o.bindTo != "none":
		return o, errors.New("--bind-to must be core, none or auto")
	}
	return o, nil
}

// reportedError is a command-line error already shown to the user.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }
