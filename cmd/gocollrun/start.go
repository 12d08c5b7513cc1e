package main

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// start starts every rank, or stops at the first that cannot start. It
// returns the number started and, if not all, the exit status to use.
func (j *job) start(notices chan<- exitNotice) (code, started int) {
	var addr string // PMI_PORT for ranks on other hosts
	if slices.ContainsFunc(j.ranks, func(r *rank) bool { return !r.local }) {
		var err error
		if addr, err = j.listen(); err != nil {
			j.logf("cannot listen for PMI connections: %v", err)
			return exitNoStart, 0
		}
	}
	for i, r := range j.ranks {
		if err := j.startRank(r, addr); err != nil {
			j.logf("cannot start rank %d: %v", r.id, err)
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
				return exitNotFound, i
			}
			return exitNoStart, i
		}
		go func() {
			err := r.cmd.Wait()
			state := r.cmd.ProcessState
			if state == nil {
				// Wait failed without a status; should not happen for a
				// started process, but never lose the notice.
				j.logf("waiting for rank %d: %v", r.id, err)
			}
			notices <- exitNotice{r.id, state}
		}()
	}
	return 0, len(j.ranks)
}

// listen starts the PMI server's TCP listener for ranks on other hosts and
// returns the address they dial.
func (j *job) listen() (string, error) {
	bind := j.opts.bind
	if bind == "" {
		bind = "0.0.0.0"
	}
	host, port := bind, "0"
	if h, p, err := net.SplitHostPort(bind); err == nil {
		host, port = h, p
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return "", err
	}
	go j.server.Serve(l)
	_, port, _ = net.SplitHostPort(l.Addr().String())
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		// Listening everywhere: advertise our name, as hydra does.
		if host, err = os.Hostname(); err != nil {
			return "", err
		}
	}
	return net.JoinHostPort(host, port), nil
}

// startRank starts one rank: directly when it is local, with its PMI
// connection on an inherited socket; through the launcher otherwise, with
// PMI_PORT.
func (j *job) startRank(r *rank, pmiAddr string) error {
	vars := map[string]string{
		"PMI_RANK":          strconv.Itoa(r.id),
		"PMI_SIZE":          strconv.Itoa(len(j.ranks)),
		"GOCOLL_JOB_ID":     j.id,
		"GOCOLL_JOB_SECRET": j.secret,
		"GOCOLL_HOST":       r.host,
	}
	var child *os.File // the rank's end of its PMI socketpair
	if r.local {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		parent := os.NewFile(uintptr(fds[0]), "pmi")
		conn, err := net.FileConn(parent)
		parent.Close()
		child = os.NewFile(uintptr(fds[1]), "pmi-child")
		defer child.Close()
		if err != nil {
			return err
		}
		go j.server.ServeConn(conn, r.id)
		vars["PMI_FD"] = "3" // ExtraFiles[0]
	} else {
		vars["PMI_PORT"] = pmiAddr
		vars["PMI_ID"] = j.server.PortID(r.id)
	}
	env := rankEnv(os.Environ(), vars)

	var cmd *exec.Cmd
	if r.local {
		cmd = exec.Command(j.opts.prog[0], j.opts.prog[1:]...)
		cmd.ExtraFiles = []*os.File{child}
	} else {
		argv, secretOnStdin, err := remoteArgv(j.opts.launcher, r.host, env, j.opts.prog)
		if err != nil {
			return err
		}
		cmd = exec.Command(argv[0], argv[1:]...)
		if secretOnStdin {
			cmd.Stdin = strings.NewReader(j.secret + "\n")
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	cmd.WaitDelay = time.Second
	stdout, err := j.out.pipe(r.id, os.Stdout)
	if err != nil {
		return err
	}
	defer stdout.Close()
	stderr, err := j.out.pipe(r.id, os.Stderr)
	if err != nil {
		return err
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := j.startPinned(cmd, r); err != nil {
		return err
	}
	r.cmd, r.pid = cmd, cmd.Process.Pid
	return nil
}
