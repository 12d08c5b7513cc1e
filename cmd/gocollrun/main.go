package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	os.Exit(gocollrun(os.Args[1:]))
}

// gocollrun is main without the exit, and returns the exit status.
func gocollrun(args []string) int {
	if len(args) > 0 && args[0] == "--proxy" {
		return runProxy(args[1:])
	}
	o, err := parseOptions(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var reported reportedError
	if errors.As(err, &reported) {
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gocollrun: %v\n", err)
		fmt.Fprintln(os.Stderr, "run gocollrun -h for help")
		return exitUsage
	}
	if o.info {
		printInfo(os.Stdout)
		return 0
	}
	j, err := newJob(o, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gocollrun: %v\n", err)
		return exitUsage
	}
	return j.run()
}
