package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// output forwards the ranks' standard output and error to gocollrun's,
// a whole line per write, so that lines of different ranks never mix
// mid-line. A line longer than the buffer goes out in pieces.
type output struct {
	tag    bool
	bufLen int
	mu     sync.Mutex     // one write to stdout or stderr at a time
	wg     sync.WaitGroup // the copying goroutines

	pipesMu sync.Mutex
	pipes   []*os.File // read ends, closed by wait
}

func newOutput(tag bool) *output { return &output{tag: tag, bufLen: 64 << 10} }

// pipe returns the write end to give a rank as stdout or stderr, and
// starts copying what arrives to dst.
func (o *output) pipe(rank int, dst io.Writer) (*os.File, error) {
	prefix := ""
	if o.tag {
		prefix = fmt.Sprintf("[%d] ", rank)
	}
	return o.pipeTo(dst, prefix)
}

// pipeTo is pipe with the prefix given.
func (o *output) pipeTo(dst io.Writer, prefix string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	o.pipesMu.Lock()
	o.pipes = append(o.pipes, r)
	o.pipesMu.Unlock()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		o.copyLines(r, dst, prefix)
	}()
	return w, nil
}

// copyLines writes every line read from r to dst, with prefix at the
// start of each line.
func (o *output) copyLines(r io.Reader, dst io.Writer, prefix string) {
	br := bufio.NewReaderSize(r, o.bufLen)
	atStart := true
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			line := chunk
			if prefix != "" {
				if atStart {
					line = append([]byte(prefix), chunk...)
				}
				// At the end of the stream, end a tagged line so the next
				// tag starts a line of its own.
				if err != nil && !errors.Is(err, bufio.ErrBufferFull) && chunk[len(chunk)-1] != '\n' {
					line = append(line, '\n')
				}
			}
			o.mu.Lock()
			dst.Write(line)
			o.mu.Unlock()
			atStart = chunk[len(chunk)-1] == '\n'
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// write writes lines forwarded by a proxy, whole (and tagged) already.
func (o *output) write(dst io.Writer, lines []byte) {
	o.mu.Lock()
	dst.Write(lines)
	o.mu.Unlock()
}

// wait waits until every pipe has reached end of file, or for d; then it
// closes the read ends, abandoning output that processes outliving their
// rank (daemons holding the pipe) might still write.
func (o *output) wait(d time.Duration) {
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
	o.pipesMu.Lock()
	for _, r := range o.pipes {
		r.Close()
	}
	o.pipesMu.Unlock()
}
