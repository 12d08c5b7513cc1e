package envvar

import (
	"strings"
	"testing"
	"time"
)

// Every shared variable parses one way, and a bad value is an error that
// names it.
func TestParse(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	s, err := Parse(env())
	if err != nil || s != (Settings{Timeout: DefaultTimeout, Transport: "auto"}) {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	s, err = Parse(env("GOCOLL_DEBUG", "INFO", "GOCOLL_REPORT", "1", "GOCOLL_CHECK", "0", "GOCOLL_REPRODUCIBLE", "1",
		"GOCOLL_TIMEOUT", "90", "GOCOLL_TRANSPORT", "TCP", "GOCOLL_SHM_SLOT", "64k", "GOCOLL_SHM_CMA", "0"))
	want := Settings{Debug: true, Report: true, Reproducible: true, Timeout: 90 * time.Second, Transport: "tcp",
		SharedSlot: 64 << 10, SharedNoCMA: true}
	if err != nil || s != want {
		t.Errorf("got %+v, %v; want %+v", s, err, want)
	}
	if s, _ := Parse(env("GOCOLL_TIMEOUT", "5m")); s.Timeout != 5*time.Minute {
		t.Errorf("GOCOLL_TIMEOUT=5m: %v", s.Timeout)
	}
	for _, bad := range [][2]string{
		{"GOCOLL_DEBUG", "loud"}, {"GOCOLL_REPORT", "yes"}, {"GOCOLL_CHECK", "2"}, {"GOCOLL_REPRODUCIBLE", "on"},
		{"GOCOLL_TIMEOUT", "-5s"}, {"GOCOLL_TIMEOUT", "soon"}, {"GOCOLL_TRANSPORT", "ib"},
		{"GOCOLL_SHM_SLOT", "0K"}, {"GOCOLL_SHM_SLOT", "12MB"}, {"GOCOLL_SHM_CMA", "off"},
	} {
		_, err := Parse(env(bad[0], bad[1]))
		if err == nil || !strings.Contains(err.Error(), bad[0]+"="+bad[1]) {
			t.Errorf("%s=%s: %v", bad[0], bad[1], err)
		}
	}
}
