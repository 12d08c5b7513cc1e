package preload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// memoRules give every MPI_Allreduce on one rank to gocoll and on more
// to the host (testdata/memo.c).
const memoRules = `{"rules": [
	{"collective": "allreduce", "max_ranks": 1, "algorithm": "ring"},
	{"collective": "allreduce", "min_ranks": 2, "algorithm": "native"}
]}`

// A decision the C half remembers (a communicator's cache, a thread's
// memos) holds only for the communicator, datatype and op it was made
// for: memo.c changes one at a time after a remembered call and checks
// where each call went, over both hosts, without GOCOLL_DEBUG (which
// bypasses both).
func TestRememberedDecisionInvalidated(t *testing.T) {
	rules := filepath.Join(harness.Work, "memo-rules.json")
	if err := os.WriteFile(rules, []byte(memoRules), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			prog := compile(t, m.cc, "memo-"+m.name, "memo.c")
			env := []string{"GOCOLL_TUNING_FILE=" + rules, "GOCOLL_PRELOAD_EXCLUDE=MPI_SUM:MPI_FLOAT,MPI_MAX:MPI_INT"}
			out, code, errs := runRanks(t, m.name+" memo", m, 2, env, prog)
			if code != 0 || !strings.Contains(out, "rank 0: ") || strings.Contains(out, " 0 passed") ||
				!countsRE.MatchString(out) || countsRE.FindStringSubmatch(out)[2] != "0" {
				t.Fatalf("%s: exit %d\n%s\n%s", m.name, code, out, strings.Join(errs, ""))
			}
			t.Logf("%s:\n%s", m.name, out)
		})
	}
}
