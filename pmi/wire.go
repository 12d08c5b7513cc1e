package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The limits this package's server announces in its maxes reply, the same
// as hydra's. Like C strings they count a terminating NUL, so the longest
// key is keylenMax-1 bytes and the longest value vallenMax-1.
const (
	kvsnameMax = 256
	keylenMax  = 64
	vallenMax  = 1024
)

// maxLine bounds one protocol line: a put with the longest kvsname, key
// and value fits with room to spare.
const maxLine = 4096

// message is one protocol line: cmd=<cmd> followed by key=value pairs.
type message struct {
	cmd  string
	args map[string]string
	// ranks holds a gocoll_ranks reply's values, by rank.
	ranks []string
}

// parseLine splits "cmd=put kvsname=k key=a value=b" into its command and
// arguments. A value runs to the next space and may contain '='.
func parseLine(line string) (message, error) {
	line = strings.TrimRight(line, "\r\n")
	m := message{args: map[string]string{}}
	for i, field := range strings.Fields(line) {
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return m, fmt.Errorf("pmi: malformed field %q in %q", field, line)
		}
		if i == 0 {
			if k != "cmd" {
				return m, fmt.Errorf("pmi: line %q does not start with cmd=", line)
			}
			m.cmd = v
			continue
		}
		m.args[k] = v
	}
	if m.cmd == "" {
		return m, fmt.Errorf("pmi: empty command line %q", line)
	}
	return m, nil
}

// formatLine builds "cmd=<cmd> k1=v1 k2=v2\n" from alternating keys and
// values, in the order given.
func formatLine(cmd string, kv ...string) []byte {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(cmd)
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteByte(' ')
		b.WriteString(kv[i])
		b.WriteByte('=')
		b.WriteString(kv[i+1])
	}
	b.WriteByte('\n')
	return []byte(b.String())
}

// readMessage reads and parses one line. r must have a buffer of at least
// maxLine bytes; a longer line is an error.
func readMessage(r *bufio.Reader) (message, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return message{}, fmt.Errorf("pmi: protocol line longer than %d bytes", r.Size())
	}
	if err != nil {
		return message{}, err
	}
	return parseLine(string(line))
}

// readRanks reads a gocoll_getranks reply of up to limit bytes: its
// values v0..v<size-1>, in this order, go to message.ranks rather than
// to the map of arguments.
func readRanks(r *bufio.Reader, size, limit int) (message, error) {
	line := make([]byte, 0, min(limit, size*64+maxLine))
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > limit {
			return message{}, fmt.Errorf("pmi: protocol line longer than %d bytes", limit)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return message{}, err
		}
		break
	}
	s := strings.TrimRight(string(line), "\r\n")
	head := s
	if i := strings.Index(s, " v0="); i >= 0 {
		head, s = s[:i], s[i+1:]
	} else {
		s = ""
	}
	m, err := parseLine(head)
	if err != nil || s == "" {
		return m, err
	}
	m.ranks = make([]string, 0, size)
	for s != "" {
		field := s
		if i := strings.IndexByte(s, ' '); i >= 0 {
			field, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		k, v, ok := strings.Cut(field, "=")
		if n, err := strconv.Atoi(strings.TrimPrefix(k, "v")); !ok || err != nil || n != len(m.ranks) || k[0] != 'v' {
			return m, fmt.Errorf("pmi: gocoll_ranks: field %q out of order", k)
		}
		m.ranks = append(m.ranks, v)
	}
	return m, nil
}

// checkToken reports why s cannot travel as a key or value: the protocol
// separates fields with spaces and ends lines with newlines. Keys also
// exclude '=' and must not be empty; a value may contain '=' (the parser
// splits a field at its first '=').
func checkToken(what, s string, max int) error {
	if what == "key" && s == "" {
		return errors.New("pmi: empty key")
	}
	if what == "key" && strings.Contains(s, "=") {
		return fmt.Errorf("pmi: key %q contains '='", s)
	}
	if len(s) > max {
		return fmt.Errorf("pmi: %s is %d bytes, more than the %d the server accepts", what, len(s), max)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("pmi: %s %q contains byte %#x; only printable ASCII without spaces travels", what, s, c)
		}
	}
	return nil
}
