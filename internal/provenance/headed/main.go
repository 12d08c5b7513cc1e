// Command headed runs a command that is not gocoll's and heads its
// standard output with the provenance header (package provenance):
// tools/measure.sh runs
//
//	go run ./internal/provenance/headed go test -run XXX -bench 'Kernel|Memmove' ./ops/ > results/kernels.txt
//
// Its exit status is the command's.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/gocoll/gocoll/internal/provenance"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/provenance/headed COMMAND [ARG...] > FILE")
		os.Exit(2)
	}
	fmt.Print(provenance.Of(args, "").Comment(), "\n")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "headed:", err)
		os.Exit(1)
	}
}
