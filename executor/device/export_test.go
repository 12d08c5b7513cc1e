package device

import (
	"io"

	"github.com/gocoll/gocoll/gpu"
)

// SetWarnOutput sends the executor's warnings to w until restore is
// called, and forgets which runtimes have warned.
func SetWarnOutput(w io.Writer) (restore func()) {
	warnMu.Lock()
	old := warnOutput
	warnOutput, warned = w, map[*gpu.Runtime]bool{}
	warnMu.Unlock()
	return func() {
		warnMu.Lock()
		warnOutput = old
		warnMu.Unlock()
	}
}
