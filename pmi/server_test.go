package pmi

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// rawConn is a connection on which the test writes protocol lines itself.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func (rc rawConn) call(t *testing.T, line string) string {
	t.Helper()
	rc.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := rc.r.ReadString('\n')
	if err != nil {
		t.Fatalf("reply to %q: %v", line, err)
	}
	return strings.TrimSuffix(reply, "\n")
}

func rawRank(t *testing.T, s *Server, rank int) rawConn {
	a, b := socketpair(t)
	go s.ServeConn(fdConn(t, a), rank)
	c := fdConn(t, b)
	t.Cleanup(func() { c.Close() })
	return rawConn{c, bufio.NewReader(c)}
}

func TestServerReplies(t *testing.T) {
	s := NewServer(2, "kvs_raw")
	defer s.Close()
	rc := rawRank(t, s, 1)
	for _, tc := range []struct{ send, want string }{
		{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"},
		{"cmd=get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 gocoll_getranks=1"},
		{"cmd=get_appnum", "cmd=appnum appnum=0"},
		{"cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_raw"},
		{"cmd=get_universe_size", "cmd=universe_size size=2"},
		{"cmd=put kvsname=kvs_raw key=a value=x=y", "cmd=put_result rc=0 msg=success"},
		{"cmd=get kvsname=kvs_raw key=a", "cmd=get_result rc=0 msg=success value=x=y"},
		{"cmd=get kvsname=kvs_raw key=b", "cmd=get_result rc=-1 msg=key_b_not_found value=unknown"},
		{"cmd=put kvsname=other key=a value=1", "cmd=put_result rc=-1 msg=unknown_kvsname"},
		{"cmd=put kvsname=kvs_raw key=a value=" + strings.Repeat("v", vallenMax), "cmd=put_result rc=-1 msg=value_too_long"},
		{"cmd=put kvsname=kvs_raw key=" + strings.Repeat("k", keylenMax) + " value=1", "cmd=put_result rc=-1 msg=key_too_long"},
		{"cmd=bogus", "cmd=bogus_result rc=-1 msg=unknown_command"},
		{"cmd=finalize", "cmd=finalize_ack"},
	} {
		if got := rc.call(t, tc.send); got != tc.want {
			t.Errorf("%.60s: got %.80q, want %.80q", tc.send, got, tc.want)
		}
	}
	select {
	case e := <-s.Events():
		if e.Kind != ProtocolError || e.Rank != 1 || !strings.Contains(e.Msg, "bogus") {
			t.Errorf("event %+v, want a protocol error about bogus", e)
		}
	case <-time.After(5 * time.Second):
		t.Error("no event for an unknown command")
	}
	if err := s.ServeConn(fdConn(t, must(socketpair(t))), 1); err == nil {
		t.Error("a second connection for rank 1 was served")
	}
}

func must(a, _ int) int { return a }

func TestStuckBarrier(t *testing.T) {
	s, clients := startJob(t, 3)
	errs := make(chan error, 2)
	for _, c := range clients[:2] {
		go func() { errs <- c.Fence() }()
	}
	// Rank 2 ends without entering; whenever that lands relative to the
	// others' barrier_in, the server reports it once.
	s.Exited(2)
	select {
	case e := <-s.Events():
		if e.Kind != Stuck || e.Other != 2 || (e.Rank != 0 && e.Rank != 1) {
			t.Errorf("event %+v, want ranks 0/1 stuck on rank 2", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Stuck event")
	}
	s.Close()
	for range 2 {
		select {
		case err := <-errs:
			if err == nil {
				t.Error("a Fence succeeded without rank 2")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Fence did not return after the server closed")
		}
	}
}

func TestAbortEvent(t *testing.T) {
	s, clients := startJob(t, 2)
	// Abort gets through while the same client waits in a Fence.
	fenced := make(chan error, 1)
	go func() { fenced <- clients[1].Fence() }()
	time.Sleep(10 * time.Millisecond)
	if err := clients[1].Abort(7, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-s.Events():
		if e.Kind != Abort || e.Rank != 1 || e.Code != 7 {
			t.Errorf("event %+v, want rank 1 abort 7", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Abort event")
	}
	s.Close()
	within(t, 5*time.Second, "the Fence", func() { <-fenced })
}
