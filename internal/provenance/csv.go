package provenance

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
)

// Rows reads a CSV as gocoll's tools write it (-csv): its header's #
// lines and blank lines skipped, the first row the column names, which
// must include want. row is called for each later row with its line
// number and a lookup of its fields by column name ("" for a column the
// file lacks); its error stops the reading. A file without rows is an
// error. path names the file in errors.
func Rows(path, text string, want []string, row func(line int, field func(name string) string) error) error {
	var cols []string
	rows := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" {
			continue
		}
		fs := strings.Split(l, ",")
		if cols == nil {
			cols = fs
			for _, w := range want {
				if !slices.Contains(cols, w) {
					return fmt.Errorf("%s: no column %q in %q", path, w, l)
				}
			}
			continue
		}
		if len(fs) != len(cols) {
			return fmt.Errorf("%s:%d: %d fields, the header has %d", path, line, len(fs), len(cols))
		}
		field := func(name string) string {
			if i := slices.Index(cols, name); i >= 0 {
				return fs[i]
			}
			return ""
		}
		if err := row(line, field); err != nil {
			return err
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if rows == 0 {
		return fmt.Errorf("%s: no rows", path)
	}
	return nil
}
