package main

import (
	"bytes"
	"sync"
)

// bulkCache lets a host's proxy fetch each bulk get (gocoll_getranks,
// which returns every rank's start-up card) from gocollrun once for all
// of its ranks, which all ask for the same prefix after the same fence:
// at p ranks on h hosts gocollrun then sends h replies of ~150p bytes
// instead of p. The first rank's request goes to gocollrun; the others
// wait for its reply. Ranks speak PMI-1 to gocollrun one request at a time
// and wait for its reply, so a rank's next reply line after a bulk
// request is the bulk reply.
type bulkCache struct {
	mu      sync.Mutex
	entries map[string]*bulkEntry // by request line
	served  int                   // requests answered from the cache
	fetched int                   // requests sent to gocollrun
}

type bulkEntry struct {
	done chan struct{} // closed when line is set
	line []byte
}

// bulkPrefix is how the bulk request line starts.
var bulkPrefix = []byte("cmd=gocoll_getranks ")

// request handles one request line of a rank. It returns the entry whose
// reply the rank must get and whether the request must still go to
// gocollrun (the first for its line); nil for any other request.
func (c *bulkCache) request(line []byte) (e *bulkEntry, forward bool) {
	if !bytes.HasPrefix(line, bulkPrefix) {
		return nil, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*bulkEntry{}
	}
	if e := c.entries[string(line)]; e != nil {
		c.served++
		return e, false
	}
	e = &bulkEntry{done: make(chan struct{})}
	c.entries[string(line)] = e
	c.fetched++
	return e, true
}

// reply keeps the reply line gocollrun sent for e's request and releases
// the ranks waiting for it.
func (c *bulkCache) reply(e *bulkEntry, line []byte) {
	e.line = line
	close(e.done)
}

// counts says how many bulk requests went to gocollrun and how many the
// cache answered.
func (c *bulkCache) counts() (fetched, served int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fetched, c.served
}
