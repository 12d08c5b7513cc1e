package tuner_test

import (
	"path/filepath"
	"testing"

	"github.com/gocoll/gocoll/tuner"
)

// The tuning files in results/ (gocoll-tune's, headed by their
// provenance) load as GOCOLL_TUNING_FILE.
func TestResultsTuningFilesLoad(t *testing.T) {
	files, err := filepath.Glob("../results/tune-np*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no results/tune-np*.json: %v", err)
	}
	for _, f := range files {
		tf, err := tuner.ReadTuningFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if tf.Provenance == nil || tf.Provenance.Command == "" || tf.Provenance.Commit == "" || tf.Provenance.Machine == "" {
			t.Errorf("%s: provenance %+v", f, tf.Provenance)
		}
		if len(tf.Rules) == 0 {
			t.Errorf("%s: no rules", f)
		}
	}
}
