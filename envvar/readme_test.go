package envvar_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/preload/native"
)

// The README documents every variable and every algorithm.
func TestREADMEIsComplete(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range envvar.All {
		if !strings.Contains(string(readme), "`"+v.Name+"`") {
			t.Errorf("README does not document %s", v.Name)
		}
	}
	for _, c := range algorithms.Collectives {
		for _, name := range algorithms.Names(c) {
			if !strings.Contains(string(readme), "`"+name+"`") {
				t.Errorf("README does not list %s algorithm %s", c, name)
			}
		}
	}
}

// envvar cannot import the preload (it imports the tuner, which imports
// envvar): its copy of the native candidate's name must stay the same.
func TestNativeName(t *testing.T) {
	if envvar.Native != native.Name {
		t.Errorf("envvar.Native = %q, preload/native.Name = %q", envvar.Native, native.Name)
	}
}
