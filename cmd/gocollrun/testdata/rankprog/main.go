// Command rankprog is the rank program of gocollrun's tests. Its first
// argument picks a behaviour; "who" arguments name the rank that
// misbehaves while the others wait.
//
//	kvs                 put, fence, read every rank's key; print PASS
//	env                 print the job's variables as seen by this rank
//	output LINES        print LINES long lines on stdout and on stderr
//	exit WHO CODE       WHO exits with CODE; the others wait in a fence
//	kill WHO            WHO kills itself with SIGKILL; the others sleep
//	abort WHO CODE      WHO calls PMI abort; the others wait in a fence
//	nofinalize WHO      WHO exits 0 without finalize; the others finalize a second later
//	nofinalize-stuck WHO  WHO exits 0 without finalize; the others fence
//	hang                print READY <rank> <pid> and sleep
//	stubborn            ignore SIGTERM, then as hang
//	shm                 leave /dev/shm/gocoll-<GOCOLL_JOB_ID>-rank<r> behind
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocoll/gocoll/pmi"
)

func main() {
	c, ok, err := pmi.FromEnv()
	if err != nil {
		fail("FromEnv: %v", err)
	}
	if !ok {
		fail("not started by a PMI launcher")
	}
	r, n := c.Rank(), c.Size()
	args := os.Args[1:]
	if len(args) == 0 {
		fail("no mode")
	}
	arg := func(i int) int {
		if i >= len(args) {
			fail("%s needs %d arguments", args[0], i)
		}
		v, err := strconv.Atoi(args[i])
		if err != nil {
			fail("%v", err)
		}
		return v
	}
	switch args[0] {
	case "kvs":
		check(c.Put(fmt.Sprintf("k%d", r), fmt.Sprintf("v%d-%s", r, os.Getenv("GOCOLL_HOST"))))
		check(c.Fence())
		var seen []string
		for p := range n {
			v, err := c.Get(fmt.Sprintf("k%d", p))
			check(err)
			if !strings.HasPrefix(v, fmt.Sprintf("v%d-", p)) {
				fail("rank %d: rank %d's key is %q", r, p, v)
			}
			seen = append(seen, v)
		}
		check(c.Finalize())
		fmt.Printf("PASS rank %d of %d saw %s\n", r, n, strings.Join(seen, ","))
	case "env":
		secret := os.Getenv("GOCOLL_JOB_SECRET")
		fmt.Printf("ENV rank=%d size=%d PMI_RANK=%s PMI_SIZE=%s PMI_FD=%s PMI_PORT=%s PMI_ID=%s GOCOLL_JOB_ID=%s GOCOLL_HOST=%s GOCOLL_FAKEHOST=%s RANKPROG_VAR=%s GOCOLL_TCP_ADDR=%s secret=%s\n",
			r, n, os.Getenv("PMI_RANK"), os.Getenv("PMI_SIZE"), os.Getenv("PMI_FD"), os.Getenv("PMI_PORT"), os.Getenv("PMI_ID"),
			os.Getenv("GOCOLL_JOB_ID"), os.Getenv("GOCOLL_HOST"), os.Getenv("GOCOLL_FAKEHOST"), os.Getenv("RANKPROG_VAR"), os.Getenv("GOCOLL_TCP_ADDR"), secret)
		check(c.Finalize())
	case "output":
		lines := arg(1)
		pad := strings.Repeat("x", 300)
		for i := range lines {
			fmt.Printf("rank %d line %d %s\n", r, i, pad)
			fmt.Fprintf(os.Stderr, "rank %d err %d %s\n", r, i, pad)
		}
		fmt.Print("no newline at the end")
		check(c.Finalize())
	case "exit":
		if r == arg(1) {
			os.Exit(arg(2))
		}
		c.Fence()
		fail("rank %d: the fence completed without rank %d", r, arg(1))
	case "kill":
		if r == arg(1) {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Hour)
	case "abort":
		if r == arg(1) {
			check(c.Abort(arg(2), "rankprog aborts on purpose"))
			select {}
		}
		c.Fence()
		fail("rank %d: the fence completed despite the abort", r)
	case "nofinalize":
		if r == arg(1) {
			os.Exit(0)
		}
		time.Sleep(time.Second)
		check(c.Finalize())
	case "nofinalize-stuck":
		if r == arg(1) {
			os.Exit(0)
		}
		c.Fence()
		fail("rank %d: the fence completed without rank %d", r, arg(1))
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fallthrough
	case "hang":
		fmt.Printf("READY %d %d\n", r, os.Getpid())
		time.Sleep(time.Hour)
	case "shm":
		name := fmt.Sprintf("/dev/shm/gocoll-%s-rank%d", os.Getenv("GOCOLL_JOB_ID"), r)
		check(os.WriteFile(name, []byte("segment"), 0o600))
		fmt.Println("SHM", name)
		check(c.Finalize())
	default:
		fail("unknown mode %q", args[0])
	}
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "rankprog: "+format+"\n", args...)
	os.Exit(1)
}
