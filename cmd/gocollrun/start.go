package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// start starts the local ranks, then the launchers of the remote hosts'
// proxies, or stops at the first that cannot start; r.started marks the
// ranks an exit notice will come for. It returns the exit status to use
// if not all started, or 0.
func (j *job) start(notices chan<- exitNotice) int {
	for _, r := range j.ranks {
		if !r.local {
			continue
		}
		if err := j.startRank(r); err != nil {
			j.logf("cannot start rank %d: %v", r.id, err)
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
				return exitNotFound
			}
			return exitNoStart
		}
		r.started = true
		go func() {
			err := r.cmd.Wait()
			if ps := r.cmd.ProcessState; ps != nil {
				s := statusOf(ps)
				notices <- exitNotice{rank: r.id, state: &s}
				return
			}
			// Wait failed without a status; should not happen for a
			// started process, but never lose the notice.
			notices <- exitNotice{rank: r.id, why: fmt.Sprintf("waiting for it: %v", err)}
		}()
	}
	if len(j.hosts) == 0 {
		return 0
	}
	addr, err := j.listen()
	if err != nil {
		j.logf("cannot listen for the proxies of the other hosts: %v", err)
		return exitNoStart
	}
	return j.startHosts(addr, notices)
}

// listen starts the listener the remote hosts' proxies dial and returns
// the address they dial.
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
	j.listener = l
	go j.acceptProxies(l)
	_, port, _ = net.SplitHostPort(l.Addr().String())
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		// Listening everywhere: advertise our name, as hydra does.
		if host, err = os.Hostname(); err != nil {
			return "", err
		}
	}
	return net.JoinHostPort(host, port), nil
}

// startRank starts one local rank, with its PMI connection on an
// inherited socket.
func (j *job) startRank(r *rank) error {
	vars := map[string]string{
		"PMI_RANK":          strconv.Itoa(r.id),
		"PMI_SIZE":          strconv.Itoa(len(j.ranks)),
		"PMI_FD":            "3", // ExtraFiles[0]
		"GOCOLL_JOB_ID":     j.id,
		"GOCOLL_JOB_SECRET": j.secret,
		"GOCOLL_HOST":       r.host,
		"GOCOLL_NUM_HOSTS":  strconv.Itoa(j.numHosts),
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	parent := os.NewFile(uintptr(fds[0]), "pmi")
	conn, err := net.FileConn(parent)
	parent.Close()
	child := os.NewFile(uintptr(fds[1]), "pmi-child")
	defer child.Close()
	if err != nil {
		return err
	}
	go j.server.ServeConn(conn, r.id)
	env := rankEnv(os.Environ(), vars)

	cmd := exec.Command(j.opts.prog[0], j.opts.prog[1:]...)
	cmd.ExtraFiles = []*os.File{child}
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
