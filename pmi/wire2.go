package pmi

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// PMI-2's limits (PMI2_MAX_KEYLEN, PMI2_MAX_VALLEN), counting a
// terminating NUL as PMI-1's do. PMI-2 has no get_maxes: servers take
// these from the same header.
const (
	keylenMax2 = 64
	vallenMax2 = 1024
)

// maxBody2 is the longest message the 6-digit length header can announce.
const maxBody2 = 999999

// formatV2 builds one PMI-2 message: a 6-character decimal length, padded
// with spaces, then "cmd=<cmd>;k1=v1;k2=v2;". Slurm pads on the right and
// MPICH on the left; both read either.
func formatV2(cmd string, kv ...string) ([]byte, error) {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(cmd)
	b.WriteByte(';')
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString(kv[i])
		b.WriteByte('=')
		b.WriteString(kv[i+1])
		b.WriteByte(';')
	}
	if b.Len() > maxBody2 {
		return nil, fmt.Errorf("pmi: %s message of %d bytes is longer than PMI-2's %d", cmd, b.Len(), maxBody2)
	}
	return []byte(fmt.Sprintf("%-6d", b.Len()) + b.String()), nil
}

// readV2 reads and parses one PMI-2 message.
func readV2(r *bufio.Reader) (message, error) {
	var head [6]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return message{}, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(head[:])))
	if err != nil || n <= 0 {
		return message{}, fmt.Errorf("pmi: PMI-2 length header %q is not a positive number", head[:])
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return message{}, fmt.Errorf("pmi: reading a %d-byte PMI-2 message: %w", n, err)
	}
	return parseV2(string(body))
}

// parseV2 splits "cmd=x;k=v;" into its command and arguments. Values
// carry no ';' here: escapes differ between servers (Slurm has none, old
// MPICH doubles it, new MPICH uses a backslash), so the client never
// sends one (checkToken2) and reads a ';' as the end of a field.
func parseV2(body string) (message, error) {
	m := message{args: map[string]string{}}
	for i, field := range strings.Split(body, ";") {
		if field == "" {
			continue
		}
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return m, fmt.Errorf("pmi: malformed field %q in PMI-2 message %q", field, body)
		}
		if i == 0 {
			if k != "cmd" {
				return m, fmt.Errorf("pmi: PMI-2 message %q does not start with cmd=", body)
			}
			m.cmd = v
			continue
		}
		m.args[k] = v
	}
	if m.cmd == "" {
		return m, fmt.Errorf("pmi: PMI-2 message %q has no command", body)
	}
	return m, nil
}

// checkToken2 reports why s cannot travel as a PMI-2 key or value: ';'
// ends a field, '\\' is MPICH's escape, and the rest is PMI-1's rule
// (printable ASCII without spaces, keys without '=').
func checkToken2(what, s string, max int) error {
	if strings.ContainsAny(s, ";\\") {
		return fmt.Errorf("pmi: %s %q contains ';' or '\\', which PMI-2 servers escape differently", what, s)
	}
	return checkToken(what, s, max)
}
