package pmi

import (
	"bufio"
	"reflect"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		cmd  string
		args map[string]string
		bad  bool
	}{
		{line: "cmd=barrier_out\n", cmd: "barrier_out", args: map[string]string{}},
		{line: "cmd=get_result rc=0 msg=success value=a=b\n", cmd: "get_result",
			args: map[string]string{"rc": "0", "msg": "success", "value": "a=b"}},
		{line: "cmd=get_result rc=0 value=\n", cmd: "get_result", args: map[string]string{"rc": "0", "value": ""}},
		{line: "cmd=set  size=3\r\n", cmd: "set", args: map[string]string{"size": "3"}},
		{line: "put key=a\n", bad: true},
		{line: "key=a cmd=put\n", bad: true},
		{line: "cmd=put novalue\n", bad: true},
		{line: "\n", bad: true},
	} {
		m, err := parseLine(tc.line)
		if tc.bad {
			if err == nil {
				t.Errorf("parseLine(%q) = %+v, want an error", tc.line, m)
			}
			continue
		}
		if err != nil || m.cmd != tc.cmd || !reflect.DeepEqual(m.args, tc.args) {
			t.Errorf("parseLine(%q) = %+v, %v; want cmd %s args %v", tc.line, m, err, tc.cmd, tc.args)
		}
	}
}

func TestFormatLine(t *testing.T) {
	got := string(formatLine("put", "kvsname", "kvs_1", "key", "k", "value", "v"))
	if want := "cmd=put kvsname=kvs_1 key=k value=v\n"; got != want {
		t.Errorf("formatLine = %q, want %q", got, want)
	}
	if got := string(formatLine("barrier_in")); got != "cmd=barrier_in\n" {
		t.Errorf("formatLine(barrier_in) = %q", got)
	}
}

func TestReadMessageTooLong(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("cmd=put value="+strings.Repeat("x", 2*maxLine)+"\n"), maxLine)
	if _, err := readMessage(r); err == nil || !strings.Contains(err.Error(), "longer") {
		t.Errorf("readMessage of an over-long line: %v, want a length error", err)
	}
}

func TestCheckToken(t *testing.T) {
	for _, tc := range []struct {
		what, s string
		ok      bool
	}{
		{"key", "addr-3", true},
		{"key", "", false},
		{"key", "a=b", false},
		{"value", "a=b", true},
		{"value", "", true},
		{"value", "a b", false},
		{"value", "a\nb", false},
		{"value", "é", false},
		{"value", strings.Repeat("v", 10), true},
		{"value", strings.Repeat("v", 11), false},
	} {
		if err := checkToken(tc.what, tc.s, 10); (err == nil) != tc.ok {
			t.Errorf("checkToken(%s, %q) = %v, want ok=%v", tc.what, tc.s, err, tc.ok)
		}
	}
}
