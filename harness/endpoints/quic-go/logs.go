// Output files of the endpoint: the NDJSON application log (LL_APPLOG), the
// NSS key log (SSLKEYLOGFILE) and one JSON-SEQ qlog file per connection (QLOGDIR).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"
	"golang.org/x/sys/unix"
)

// appLog writes application events; a nil *appLog (no LL_APPLOG) drops them.
type appLog struct {
	mu sync.Mutex
	f  *os.File
}

func openAppLog(path, cc string) (*appLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	a := &appLog{f: f}
	a.write(versionRecord{Event: "version", Stack: stackName, Version: stackVersion(), CC: cc,
		TUs: monotonicMicros(), WallUs: time.Now().UnixMicro()})
	return a, nil
}

// monotonicMicros uses CLOCK_MONOTONIC directly because the contract compares
// these times with other processes' clocks, which Go's time package hides.
func monotonicMicros() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Sec*1_000_000 + ts.Nsec/1_000
}

// event records one application event; unbuffered, so a killed process loses nothing.
func (a *appLog) event(name string, stream int64, bytes int64) {
	if a == nil {
		return
	}
	a.write(appEvent{TUs: monotonicMicros(), Event: name, Stream: stream, Bytes: bytes})
}

// Structs rather than maps keep the field order of docs/endpoints.md.
type versionRecord struct {
	Event   string `json:"event"`
	Stack   string `json:"stack"`
	Version string `json:"version"`
	CC      string `json:"cc"`
	// The pair aligns t_us with quic-go's qlog, whose reference_time is wall clock.
	TUs    int64 `json:"t_us"`
	WallUs int64 `json:"wall_us"`
}

type appEvent struct {
	TUs    int64  `json:"t_us"`
	Event  string `json:"event"`
	Stream int64  `json:"stream"`
	Bytes  int64  `json:"bytes"`
}

func (a *appLog) write(rec any) {
	line, _ := json.Marshal(rec)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.f.Write(append(line, '\n'))
}

func (a *appLog) close() {
	if a != nil {
		a.f.Close()
	}
}

// openKeyLog appends, since client and server may be pointed at one file.
func openKeyLog(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// keyLogWriter avoids handing crypto/tls a typed nil when SSLKEYLOGFILE is unset.
func keyLogWriter(f *os.File) io.Writer {
	if f == nil {
		return nil
	}
	return f
}

// qlogTracer creates one qlog file per connection, named like quic-go's own
// default (<odcid>_<client|server>.sqlog), and counts open files so the process
// can wait for the last events to reach disk.
type qlogTracer struct {
	dir  string
	open sync.WaitGroup
}

func newQlogTracer(dir string) *qlogTracer {
	return &qlogTracer{dir: dir}
}

func (t *qlogTracer) newTrace(_ context.Context, isClient bool, odcid quic.ConnectionID) qlogwriter.Trace {
	if t.dir == "" {
		return nil
	}
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "quic-go: qlog dir: %v\n", err)
		return nil
	}
	side := "server"
	if isClient {
		side = "client"
	}
	path := filepath.Join(t.dir, fmt.Sprintf("%s_%s.sqlog", odcid, side))
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "quic-go: qlog file: %v\n", err)
		return nil
	}
	t.open.Add(1)
	w := &trackedFile{buf: bufio.NewWriterSize(f, 64<<10), f: f, done: t.open.Done}
	seq := newConnectionFileSeq(w, isClient, odcid)
	go seq.Run()
	return seq
}

// wait blocks until every qlog file is closed, or the limit passes.
func (t *qlogTracer) wait(limit time.Duration) {
	done := make(chan struct{})
	go func() { t.open.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		fmt.Fprintln(os.Stderr, "quic-go: some qlog files were still open at exit")
	}
}

// trackedFile is a buffered file that reports its Close to the tracer.
type trackedFile struct {
	buf  *bufio.Writer
	f    *os.File
	once sync.Once
	done func()
}

func (w *trackedFile) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *trackedFile) Close() error {
	err := w.buf.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.once.Do(w.done)
	return err
}
