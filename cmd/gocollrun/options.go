package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/gocoll/gocoll/internal/cmdhelp"
	"io"
	"time"
)

// options is the parsed command line.
type options struct {
	n         int
	hosts     string // --host as given: "h1,h2", "h1:2,h2:2", "node[1-4]"
	hostfile  string
	mapBy     string // slot or node
	launcher  string // template for remote hosts' proxies; %h is the host
	proxyPath string // gocollrun as the remote hosts see it
	verbose   bool
	bind      string // address the PMI server listens on for remote ranks
	timeout   time.Duration
	tagOutput bool
	bindTo    string // core or none: pin local ranks to cores
	info      bool
	prog      []string // the program and its arguments
}

// help is gocollrun's --help (and its man page, tools/man.sh).
var help = cmdhelp.Help{
	Name:    "gocollrun",
	Summary: "start the ranks of a gocoll (or any PMI-1) program, on this host or many",
	Usage: []string{
		"gocollrun -n N [--host h1,h2,... | h1:2,h2:2 | node[01-16] | --hostfile FILE]",
		"          [--map-by slot|node] [--launcher 'ssh %h'] [--proxy-path PATH]",
		"          [--bind ADDR] [--bind-to core|none] [--timeout DUR] [--tag-output] [-v] prog [args...]",
		"gocollrun --info",
	},
	About: `Starts N ranks of prog and serves them PMI-1. Ranks are placed over the
hosts (--host, --hostfile, or else SLURM_JOB_NODELIST) in blocks or, with
--map-by node, round robin; those on "localhost" (all of them without
hosts) are started directly, those of every other host by one proxy
(gocollrun --proxy) started there through the launcher template.`,
}

// parseOptions reads the command line (without the program name).
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("gocollrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", 0, "number of ranks")
	fs.IntVar(&o.n, "np", 0, "same as -n")
	fs.StringVar(&o.hosts, "host", "", "hosts for the ranks, `h1,h2,...` (ranks split evenly in blocks) or h1:2,h2:2 (slots filled in order); a host may be a Slurm-style range, node[01-16,20]; \"localhost\" runs ranks directly")
	fs.StringVar(&o.hostfile, "hostfile", "", "read the hosts from `file`: a host per line, as host, host:N or host slots=N; # starts a comment")
	fs.StringVar(&o.mapBy, "map-by", "slot", "placement: slot (fill each host in turn) or node (round robin over the hosts)")
	fs.StringVar(&o.launcher, "launcher", "ssh %h", "`command` that starts gocollrun's proxy on another host; %h is replaced by the host, the proxy's command line is appended")
	fs.StringVar(&o.proxyPath, "proxy-path", "", "`path` of gocollrun on the other hosts, run there as the proxy (default: this gocollrun's own path)")
	fs.BoolVar(&o.verbose, "v", false, "say where the hosts came from and where each host's ranks run")
	fs.BoolVar(&o.verbose, "verbose", false, "same as -v")
	fs.StringVar(&o.bind, "bind", "", "`address` (host or host:port) the PMI server listens on for ranks on other hosts (default: every interface, advertised by host name; a job without such ranks opens no port)")
	fs.DurationVar(&o.timeout, "timeout", 0, "kill the job after this `duration` (e.g. 90s, 5m); 0 means never")
	fs.BoolVar(&o.tagOutput, "tag-output", false, "prefix every output line with [rank]")
	fs.StringVar(&o.bindTo, "bind-to", "none", "pin local ranks: none, core (rank i on core i mod cores), or auto (core when there are no more local ranks than cores, as Open MPI does). The default is none: pinned, a rank shares its core with its Go runtime threads, which measured slower here")
	fs.BoolVar(&o.info, "info", false, "print the GOCOLL_ environment variables and the build, and exit")
	help.Set(fs, args)
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
	case o.mapBy != "slot" && o.mapBy != "node":
		return o, fmt.Errorf("--map-by %q: want slot or node", o.mapBy)
	case o.hosts != "" && o.hostfile != "":
		return o, errors.New("--host and --hostfile: give one of them")
	}
	return o, nil
}

// reportedError is a command-line error already shown to the user.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }
