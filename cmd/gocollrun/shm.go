package main

import (
	"os"
	"path/filepath"
)

// shmDir is where the shared-memory transport keeps its segments, named
// gocoll-<GOCOLL_JOB_ID>-<anything>.
const shmDir = "/dev/shm"

// removeShm deletes the job's shared-memory segments on this host. The
// transport unlinks them itself; this catches those of ranks that died
// first. Segments on other hosts are left alone.
func (j *job) removeShm() {
	names, _ := filepath.Glob(filepath.Join(shmDir, "gocoll-"+j.id+"-*"))
	for _, name := range names {
		if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
			j.logf("warning: removing %s: %v", name, err)
		}
	}
}
