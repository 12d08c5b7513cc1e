// Package version holds gocoll's version: the repository's VERSION file,
// which the Makefile writes into every library and command it builds
// (-ldflags -X). A build that did not go through make (go run, go test)
// says "devel".
package version

// Version is gocoll's version, "0.1.0", or "devel".
var Version = "devel"
