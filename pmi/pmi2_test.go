package pmi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/envvar"
)

func TestWireV2(t *testing.T) {
	b, err := formatV2("kvs-put", "key", "a", "value", "b=c")
	if err != nil {
		t.Fatal(err)
	}
	if want := "28    cmd=kvs-put;key=a;value=b=c;"; string(b) != want {
		t.Errorf("formatV2 = %q, want %q", b, want)
	}
	// Both paddings of the length: Slurm's (left-aligned) and MPICH's.
	for _, in := range []string{string(b), "    28cmd=kvs-put;key=a;value=b=c;"} {
		m, err := readV2(bufio.NewReader(strings.NewReader(in)))
		if err != nil || m.cmd != "kvs-put" || m.args["key"] != "a" || m.args["value"] != "b=c" {
			t.Errorf("readV2(%q) = %v %v", in, m, err)
		}
	}
	for _, bad := range []string{
		"",                       // nothing
		"abcdefcmd=x;",           // no length
		"0     ",                 // empty
		"-3    cmd=x;",           // negative
		"20    cmd=x;",           // shorter than announced
		"6     key=x;",           // no cmd
		"8     cmd=x;y;",         // a field without '='
		"10    key=x;cmd=y;",     // cmd not first
		"5     cmd=;",            // empty cmd
		"11    cmd=x;;;;;;",      // empty fields are skipped: fine
		"11    cmd=x;k=v",        // shorter than announced
		"999999cmd=x;k=v;......", // far shorter than announced
	} {
		m, err := readV2(bufio.NewReader(strings.NewReader(bad)))
		if bad == "11    cmd=x;;;;;;" {
			if err != nil || m.cmd != "x" {
				t.Errorf("readV2(%q) = %v, %v", bad, m, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("readV2(%q) = %v, want an error", bad, m)
		}
	}
	if _, err := formatV2("kvs-put", "value", strings.Repeat("x", maxBody2)); err == nil {
		t.Error("formatV2 of a message over the 6-digit length gave no error")
	}
}

// fakeSlurm plays Slurm's side of one rank's connection from a script of
// expected requests (raw bodies, without the length) and replies (bodies,
// sent with Slurm's left-aligned length). An empty want takes any request.
type exchange struct{ want, reply string }

func fakeSlurm(t *testing.T, conn net.Conn, script []exchange) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer conn.Close()
		r := bufio.NewReader(conn)
		line, err := r.ReadString('\n')
		if err != nil {
			done <- err
			return
		}
		if line != "cmd=init pmi_version=2 pmi_subversion=0\n" {
			done <- fmt.Errorf("init line %q", line)
			return
		}
		io.WriteString(conn, "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
		for _, x := range script {
			{
				var head [6]byte
				if _, err := io.ReadFull(r, head[:]); err != nil {
					done <- fmt.Errorf("waiting for %q: %v", x.want, err)
					return
				}
				n, _ := strconv.Atoi(strings.TrimSpace(string(head[:])))
				body := make([]byte, n)
				if _, err := io.ReadFull(r, body); err != nil {
					done <- fmt.Errorf("waiting for %q: %v", x.want, err)
					return
				}
				if x.want != "" && string(body) != x.want {
					done <- fmt.Errorf("got request %q, want %q", body, x.want)
					return
				}
			}
			if x.reply != "" {
				fmt.Fprintf(conn, "%-6d%s", len(x.reply), x.reply)
			}
		}
		done <- nil
	}()
	return done
}

// The requests are byte for byte what Slurm's pmi2 plugin parses (it
// wants pmijobid, pmirank and threaded in fullinit), and its replies,
// appnum=-1 included, are understood.
func TestClient2AgainstSlurmScript(t *testing.T) {
	a, b := socketpair(t)
	server := fakeSlurm(t, fdConn(t, a), []exchange{
		{"cmd=fullinit;pmijobid=7.0;pmirank=1;threaded=FALSE;",
			"cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=2;appnum=-1;debugged=FALSE;pmiverbose=FALSE;"},
		{"cmd=job-getid;", "cmd=job-getid-response;rc=0;jobid=7.0;"},
		{"cmd=kvs-put;key=k1;value=v=1;", "cmd=kvs-put-response;rc=0;"},
		{"cmd=kvs-fence;", "cmd=kvs-fence-response;rc=0;"},
		{"cmd=kvs-get;jobid=7.0;srcid=-1;key=k0;", "cmd=kvs-get-response;rc=0;found=TRUE;value=v0;"},
		{"cmd=kvs-get;jobid=7.0;srcid=-1;key=nope;", "cmd=kvs-get-response;rc=0;found=FALSE;"},
		{"cmd=kvs-put;key=k2;value=x;", "cmd=kvs-put-response;rc=3;errmsg=full;"},
		{"cmd=kvs-fence;", "cmd=kvs-fence-response;rc=1;errmsg=mpi/pmi2:_failed_to_send_temp_kvs;"},
		{"cmd=finalize;", "cmd=finalize-response;rc=0;"},
	})
	var c *Client2
	within(t, 10*time.Second, "the scripted session", func() {
		conn := fdConn(t, b)
		var err error
		c, err = newClient2(conn, bufio.NewReader(conn), "1", "7.0", "PMI-2 (Slurm)")
		if err != nil {
			t.Fatalf("newClient2: %v", err)
		}
		if c.Rank() != 1 || c.Size() != 2 || c.AppNum() != 0 || c.JobID() != "7.0" || c.Name() != "PMI-2 (Slurm)" {
			t.Errorf("rank %d size %d appnum %d jobid %q name %q", c.Rank(), c.Size(), c.AppNum(), c.JobID(), c.Name())
		}
		if err := c.Put("k1", "v=1"); err != nil {
			t.Error(err)
		}
		if err := c.Fence(); err != nil {
			t.Error(err)
		}
		if v, err := c.Get("k0"); v != "v0" || err != nil {
			t.Errorf("Get(k0) = %q, %v", v, err)
		}
		if _, err := c.Get("nope"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("Get of a missing key: %v", err)
		}
		if err := c.Put("k2", "x"); err == nil || !strings.Contains(err.Error(), "rc=3 (full)") {
			t.Errorf("Put answered rc=3: %v", err)
		}
		if err := c.Fence(); err == nil || !strings.Contains(err.Error(), "failed_to_send_temp_kvs") {
			t.Errorf("Fence answered rc=1: %v", err)
		}
		// Refused before anything is sent: the script has no such request.
		for _, kv := range [][2]string{{"a;b", "v"}, {"k", "v;w"}, {"k", `a\b`}, {"k", "a b"}, {"k=", "v"}, {"", "v"},
			{strings.Repeat("k", 64), "v"}, {"k", strings.Repeat("v", 1024)}} {
			if err := c.Put(kv[0], kv[1]); err == nil {
				t.Errorf("Put(%q, %q) was accepted", kv[0], kv[1])
			}
		}
		if _, err := c.Get("a;b"); err == nil {
			t.Error(`Get("a;b") was accepted`)
		}
		if err := c.Finalize(); err != nil {
			t.Errorf("Finalize: %v", err)
		}
		if err := c.Put("late", "v"); err == nil {
			t.Error("Put after Finalize was accepted")
		}
		if err := <-server; err != nil {
			t.Errorf("server side: %v", err)
		}
	})
	tr := c.Traffic()
	// Requests the server refused count too: they were round trips.
	if tr.Puts != 2 || tr.Fences != 2 || tr.Gets != 1 || tr.Other != 3 || tr.Bulk != 0 {
		t.Errorf("traffic %v, want 2 puts, 2 fences, 1 get, 3 other", tr)
	}
}

// Abort sends isworld=TRUE with the code and a message that fits in one
// value, and returns without a reply.
func TestClient2Abort(t *testing.T) {
	a, b := socketpair(t)
	server := fakeSlurm(t, fdConn(t, a), []exchange{
		{"cmd=fullinit;pmirank=0;threaded=FALSE;", "cmd=fullinit-response;rc=0;rank=0;size=1;appnum=0;"},
		{"cmd=job-getid;", "cmd=job-getid-response;rc=0;jobid=j;"},
		{"cmd=abort;isworld=TRUE;exitcode=5;msg=bad_input__see_log;", ""},
	})
	within(t, 10*time.Second, "abort", func() {
		conn := fdConn(t, b)
		c, err := newClient2(conn, bufio.NewReader(conn), "0", "", "PMI-2")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Abort(5, "bad input; see log"); err != nil {
			t.Error(err)
		}
		if err := <-server; err != nil {
			t.Errorf("server side: %v", err)
		}
	})
}

// A reply that is not the one asked for, a fullinit with rc != 0 and a
// server that hangs up are errors, not hangs.
func TestClient2BadServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []exchange
		want   string
	}{
		{"rc", []exchange{{"", "cmd=fullinit-response;rc=3;errmsg=pmijobid_missing;"}}, "rc=3 (pmijobid_missing)"},
		{"wrong reply", []exchange{{"", "cmd=kvs-put-response;rc=0;"}}, "want cmd=fullinit-response"},
		{"bad rank", []exchange{{"", "cmd=fullinit-response;rc=0;rank=4;size=2;appnum=0;"}}, "out of range"},
		{"no size", []exchange{{"", "cmd=fullinit-response;rc=0;rank=0;appnum=0;"}}, "no size"},
		{"hang-up", nil, "fullinit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := socketpair(t)
			fakeSlurm(t, fdConn(t, a), tc.script)
			within(t, 10*time.Second, tc.name, func() {
				conn := fdConn(t, b)
				_, err := newClient2(conn, bufio.NewReader(conn), "0", "", "PMI-2")
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("newClient2: %v, want an error with %q", err, tc.want)
				}
				conn.Close()
			})
		})
	}
}

// gocollrun's server speaks PMI-1 only: it answers pmi_version=2 with
// rc=-1, and a PMI-2 client says so instead of waiting.
func TestClient2AgainstPMI1Server(t *testing.T) {
	s := NewServer(1, "kvs_v1")
	defer s.Close()
	a, b := socketpair(t)
	go s.ServeConn(fdConn(t, a), 0)
	t.Setenv("PMI_FD", strconv.Itoa(b))
	t.Setenv("PMI_PORT", "")
	t.Setenv("PMI_RANK", "0")
	t.Setenv("PMI_SIZE", "1")
	within(t, 10*time.Second, "Connect", func() {
		_, ok, err := Connect(2)
		if !ok || err == nil || !strings.Contains(err.Error(), "does not speak PMI-2") || !strings.Contains(err.Error(), "GOCOLL_PMI=1") {
			t.Errorf("Connect with GOCOLL_PMI=2 against a PMI-1 server = %v, %v", ok, err)
		}
	})
}

// GOCOLL_PMI, as envvar parses it, picks the version; unset, Slurm's
// PMI_JOBID does. (envvar's tests check the invalid values' errors.)
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		gocollPMI, jobid string
		want             int
	}{
		{"", "", 1}, {"", "12.0", 2}, {"1", "12.0", 1}, {"2", "", 2}, {"3", "", 0}, {"pmix", "", 0},
	} {
		t.Setenv("PMI_JOBID", tc.jobid)
		s, err := envvar.Parse(func(k string) string {
			if k == "GOCOLL_PMI" {
				return tc.gocollPMI
			}
			return ""
		})
		if (tc.want == 0) != (err != nil) || (err == nil && version(s.PMI) != tc.want) {
			t.Errorf("GOCOLL_PMI=%q PMI_JOBID=%q: version %d, %v; want %d", tc.gocollPMI, tc.jobid, version(s.PMI), err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "GOCOLL_PMI") {
			t.Errorf("the error does not name GOCOLL_PMI: %v", err)
		}
	}
	t.Setenv("PMI_FD", "")
	t.Setenv("PMI_PORT", "127.0.0.1:1")
	t.Setenv("PMI_ID", "")
	t.Setenv("PMI_RANK", "x")
	if _, ok, err := Connect(2); !ok || err == nil || !strings.Contains(err.Error(), "PMI_RANK") {
		t.Errorf("PMI-2 without a rank id: %v, %v", ok, err)
	}
	t.Setenv("PMI_RANK", "0")
	if _, ok, err := Connect(2); !ok || err == nil || !strings.Contains(err.Error(), "PMI_PORT") {
		t.Errorf("PMI-2 with nothing at PMI_PORT: %v, %v", ok, err)
	}
}
