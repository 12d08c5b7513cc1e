package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/envvar"
)

// FromEnv connects to the PMI server that started this process, as the
// environment describes it, speaking PMI-1 (Client) or PMI-2 (Client2):
//
//   - PMI_FD: an inherited, connected socket (hydra's default, Slurm's
//     srun --mpi=pmi2, gocollrun and its proxies on other hosts), with
//     PMI_RANK and PMI_SIZE;
//   - PMI_PORT=host:port: a TCP server (hydra with -pmi-port). With PMI_ID set the client identifies itself
//     with it (PMI-1's initack, PMI-2's fullinit) and learns its rank and
//     size from the reply; without it, PMI_RANK and PMI_SIZE are required.
//
// GOCOLL_PMI=1 or 2 (envvar.Settings.PMI) chooses the version. By default it is PMI-2 where
// Slurm's pmi2 plugin started the process (it alone sets PMI_JOBID;
// gocollrun drops inherited PMI_ variables) and PMI-1 elsewhere: gocollrun
// speaks only PMI-1, and hydra both.
//
// It returns ok == false, and no error, when neither PMI_FD nor PMI_PORT is
// set: the process was not started by a PMI launcher. The inherited
// descriptor is closed on exec, so the program's own child processes do
// not inherit the connection.
func FromEnv() (l bootstrap.Launcher, ok bool, err error) {
	s, err := envvar.FromEnv()
	if err != nil {
		if os.Getenv("PMI_FD") == "" && os.Getenv("PMI_PORT") == "" {
			return nil, false, nil // no launcher; the settings' error is for others to report
		}
		return nil, true, err
	}
	return Connect(s.PMI)
}

// Connect is FromEnv with GOCOLL_PMI's value given: 1 or 2, or 0 for the
// default.
func Connect(gocollPMI int) (l bootstrap.Launcher, ok bool, err error) {
	fdStr, port := os.Getenv("PMI_FD"), os.Getenv("PMI_PORT")
	if fdStr == "" && port == "" {
		return nil, false, nil
	}
	if version(gocollPMI) == 2 {
		c, err := fromEnv2(fdStr, port)
		if err != nil {
			return nil, true, err
		}
		return c, true, nil
	}
	var c *Client
	if fdStr != "" {
		c, err = fromFD(fdStr)
	} else {
		c, err = fromPort(port, os.Getenv("PMI_ID"))
	}
	if err != nil {
		return nil, true, err
	}
	return c, true, nil
}

// version is GOCOLL_PMI's version (1 or 2) where set, else 2 under
// Slurm's pmi2 plugin (it alone sets PMI_JOBID), else 1.
func version(gocollPMI int) int {
	switch {
	case gocollPMI != 0:
		return gocollPMI
	case os.Getenv("PMI_JOBID") != "":
		return 2
	}
	return 1
}

// fromEnv2 connects a PMI-2 client through PMI_FD or PMI_PORT.
func fromEnv2(fdStr, port string) (*Client2, error) {
	id := os.Getenv("PMI_ID")
	if id == "" {
		id = os.Getenv("PMI_RANK")
	}
	if _, err := strconv.Atoi(id); err != nil {
		return nil, fmt.Errorf("pmi: PMI-2 needs the rank's id in PMI_ID or PMI_RANK, have %q", id)
	}
	var conn net.Conn
	if fdStr != "" {
		fd, err := strconv.Atoi(fdStr)
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("pmi: PMI_FD=%q is not a file descriptor", fdStr)
		}
		f := os.NewFile(uintptr(fd), "PMI_FD")
		conn, err = net.FileConn(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("pmi: PMI_FD=%d: %w", fd, err)
		}
	} else {
		var err error
		if conn, err = net.Dial("tcp", port); err != nil {
			return nil, fmt.Errorf("pmi: PMI_PORT: %w", err)
		}
	}
	c, err := newClient2(conn, bufio.NewReaderSize(conn, maxLine), id, os.Getenv("PMI_JOBID"), name2FromEnv())
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// name2FromEnv names the PMI-2 launcher for messages: Slurm sets
// SLURM_STEP_ID in every task, hydra MPI_LOCALNRANKS.
func name2FromEnv() string {
	switch {
	case os.Getenv("SLURM_STEP_ID") != "":
		return "PMI-2 (Slurm)"
	case os.Getenv("MPI_LOCALNRANKS") != "":
		return "PMI-2 (hydra)"
	}
	return "PMI-2"
}

// fromFD wraps the inherited descriptor fdStr in a connection.
func fromFD(fdStr string) (*Client, error) {
	fd, err := strconv.Atoi(fdStr)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("pmi: PMI_FD=%q is not a file descriptor", fdStr)
	}
	rank, size, err := rankSizeEnv()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "PMI_FD")
	// FileConn duplicates the descriptor (close-on-exec); drop the
	// original so that exec'd children do not hold the connection open.
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("pmi: PMI_FD=%d: %w", fd, err)
	}
	c, err := newClient(conn, bufio.NewReaderSize(conn, maxLine), rank, size)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// fromPort dials the server at addr and, with a PMI_ID, identifies itself.
func fromPort(addr, id string) (*Client, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pmi: PMI_PORT: %w", err)
	}
	r := bufio.NewReaderSize(conn, maxLine)
	var rank, size int
	if id != "" {
		rank, size, err = initack(conn, r, id)
	} else {
		rank, size, err = rankSizeEnv()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	c, err := newClient(conn, r, rank, size)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// initack sends "cmd=initack pmiid=<id>". The server answers cmd=initack
// and then "cmd=set" lines for size, rank and debug (hydra sends exactly
// these three, in this order); the client reads up to the debug line.
func initack(conn net.Conn, r *bufio.Reader, id string) (rank, size int, err error) {
	if _, err := conn.Write(formatLine("initack", "pmiid", id)); err != nil {
		return 0, 0, fmt.Errorf("pmi: sending initack: %w", err)
	}
	m, err := readMessage(r)
	if err != nil {
		return 0, 0, fmt.Errorf("pmi: waiting for initack: %w", err)
	}
	if m.cmd != "initack" {
		return 0, 0, fmt.Errorf("pmi: server answered initack with cmd=%s", m.cmd)
	}
	set := map[string]string{}
	for {
		if _, ok := set["debug"]; ok {
			break
		}
		m, err := readMessage(r)
		if err != nil {
			return 0, 0, fmt.Errorf("pmi: reading initack's settings: %w", err)
		}
		if m.cmd != "set" || len(m.args) != 1 {
			return 0, 0, fmt.Errorf("pmi: expected cmd=set after initack, got cmd=%s %v", m.cmd, m.args)
		}
		for k, v := range m.args {
			set[k] = v
		}
	}
	size, err1 := strconv.Atoi(set["size"])
	rank, err2 := strconv.Atoi(set["rank"])
	if errors.Join(err1, err2) != nil {
		return 0, 0, fmt.Errorf("pmi: bad initack settings %v", set)
	}
	return rank, size, checkRank(rank, size)
}

// rankSizeEnv reads PMI_RANK and PMI_SIZE.
func rankSizeEnv() (rank, size int, err error) {
	rank, err1 := strconv.Atoi(os.Getenv("PMI_RANK"))
	size, err2 := strconv.Atoi(os.Getenv("PMI_SIZE"))
	if errors.Join(err1, err2) != nil {
		return 0, 0, fmt.Errorf("pmi: PMI_RANK=%q PMI_SIZE=%q are not numbers", os.Getenv("PMI_RANK"), os.Getenv("PMI_SIZE"))
	}
	return rank, size, checkRank(rank, size)
}

func checkRank(rank, size int) error {
	if size < 1 || rank < 0 || rank >= size {
		return fmt.Errorf("pmi: rank %d of size %d is out of range", rank, size)
	}
	return nil
}
