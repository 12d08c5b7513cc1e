package netns

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test binary serves as the program each host runs: with
// NETNS_TEST_LISTEN set it accepts one connection on that address and
// reads it to the end, printing the bytes.
func TestMain(m *testing.M) {
	if addr := os.Getenv("NETNS_TEST_LISTEN"); addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(1)
		}
		fmt.Println("listening")
		conn, err := l.Accept()
		if err != nil {
			fmt.Println("accept:", err)
			os.Exit(1)
		}
		n, _ := io.Copy(io.Discard, conn)
		fmt.Println("read", n)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Hosts reach each other through the switch, over their loopback-range
// addresses, at no more than the links' rate; Close removes them.
func TestClusterLinksAndRate(t *testing.T) {
	if os.Geteuid() != 0 || os.Getenv("GOCOLL_TEST_NO_NETNS") == "1" {
		if os.Getenv("GOCOLL_TEST_NO_NETNS") == "1" {
			t.Skip("SKIPPED, not passed (GOCOLL_TEST_NO_NETNS=1)")
		}
		t.Fatal("emulated hosts need root; set GOCOLL_TEST_NO_NETNS=1 to skip the emulated-host tests knowingly")
	}
	c, err := New(3, "40mbit")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	if len(c.Hosts) != 3 || !strings.HasPrefix(c.Addrs[2], "127.3.") || !strings.Contains(c.String(), "40mbit") {
		t.Fatalf("cluster %v %v: %s", c.Hosts, c.Addrs, c)
	}
	// Host 2 listens and host 0 sends (the root namespace cannot reach
	// the hosts): both are this test binary again, run in the host's
	// namespace.
	addr := c.Addrs[2] + ":7311"
	srv := exec.Command(c.Exec(2, os.Args[0])[0], c.Exec(2, os.Args[0])[1:]...)
	srv.Env = append(os.Environ(), "NETNS_TEST_LISTEN="+addr)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	buf := make([]byte, 64)
	if n, _ := out.Read(buf); !strings.HasPrefix(string(buf[:n]), "listening") {
		t.Fatalf("the listener in host 2 says %q", buf[:n])
	}
	const bytes = 2 << 20 // 2 MiB at 40 Mbit/s: at least 0.4 s
	snd := exec.Command(c.Exec(0, os.Args[0], "-test.run=^TestSend$")[0], c.Exec(0, os.Args[0], "-test.run=^TestSend$")[1:]...)
	snd.Env = append(os.Environ(), "NETNS_TEST_SEND="+addr, fmt.Sprintf("NETNS_TEST_BYTES=%d", bytes))
	start := time.Now()
	if o, err := snd.CombinedOutput(); err != nil {
		t.Fatalf("sending from host 0 to %s: %v\n%s", addr, err, o)
	}
	rest, _ := io.ReadAll(out) // to the listener's end: the sender's writes end in its socket buffer
	srv.Wait()
	took := time.Since(start)
	if !strings.Contains(string(rest), fmt.Sprintf("read %d", bytes)) {
		t.Fatalf("host 2 says %q, want read %d", rest, bytes)
	}
	// A lower bound only: the rate limit holds (a loaded machine makes
	// it slower, never faster). Half the ideal time leaves room for the
	// token bucket's initial burst.
	if ideal := time.Duration(float64(bytes*8) / 40e6 * float64(time.Second)); took < ideal/2 {
		t.Errorf("2 MiB over a 40 Mbit/s link took %v, less than half of %v: the rate limit does not hold", took, ideal)
	}
	c.Close()
	closed = true
	list, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(list), fmt.Sprintf("gocoll-c%d-", c.ID)) {
		t.Errorf("namespaces left after Close:\n%s", list)
	}
}

// TestSend is the sender TestClusterLinksAndRate runs in host 0 (it does
// nothing unless NETNS_TEST_SEND is set).
func TestSend(t *testing.T) {
	addr := os.Getenv("NETNS_TEST_SEND")
	if addr == "" {
		return
	}
	var n int
	fmt.Sscan(os.Getenv("NETNS_TEST_BYTES"), &n)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
}
