// Server role: serves LL_WWW over HTTP/0.9 until SIGTERM, one response per
// bidirectional stream, and logs when each response is queued and fully handed
// to quic-go (the ground truth of when the server has data to send). In an
// upload it stores each PUT /NAME body in LL_DOWNLOADS/NAME and answers with FIN.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/quic-go/quic-go"
)

// Application error codes for what the server refuses; any non-zero value tells
// the client the request failed.
const (
	errBadRequest = quic.StreamErrorCode(0x10)
	errNotFound   = quic.StreamErrorCode(0x11)
)

func runServer(s settings, app *appLog, keyLog *os.File, tracer *qlogTracer) error {
	certDir := os.Getenv("LL_CERTS")
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "cert.pem"), filepath.Join(certDir, "priv.key"))
	if err != nil {
		return fmt.Errorf("certificates in LL_CERTS=%q: %w", certDir, err)
	}
	tlsConf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{alpn},
		KeyLogWriter: keyLogWriter(keyLog),
	}
	port := os.Getenv("LL_PORT")
	if port == "" {
		port = "4433"
	}
	www := os.Getenv("LL_WWW")
	if www == "" {
		www = "/www"
	}

	ln, err := quic.ListenAddr(net.JoinHostPort(os.Getenv("LL_ADDR"), port), tlsConf, quicConfig(s, tracer))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Println(`{"ready": true}`)

	downloads := os.Getenv("LL_DOWNLOADS")
	if downloads == "" {
		downloads = "/downloads"
	}
	srv := &server{www: www, downloads: downloads, app: app, conns: map[*quic.Conn]struct{}{}}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		ln.Close()
	}()

	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			if errors.Is(err, quic.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
				break
			}
			return fmt.Errorf("accept: %w", err)
		}
		srv.track(conn)
		go srv.serveConn(conn)
	}
	// Close what is still open so each connection's qlog file gets its final
	// events and is closed before exit.
	srv.closeAll()
	return nil
}

type server struct {
	www, downloads string
	app            *appLog

	mu    sync.Mutex
	conns map[*quic.Conn]struct{}
}

func (srv *server) track(conn *quic.Conn) {
	srv.mu.Lock()
	srv.conns[conn] = struct{}{}
	srv.mu.Unlock()
	go func() {
		<-conn.Context().Done()
		srv.mu.Lock()
		delete(srv.conns, conn)
		srv.mu.Unlock()
	}()
}

func (srv *server) closeAll() {
	srv.mu.Lock()
	open := make([]*quic.Conn, 0, len(srv.conns))
	for c := range srv.conns {
		open = append(open, c)
	}
	srv.mu.Unlock()
	for _, c := range open {
		c.CloseWithError(0, "server shutting down")
	}
}

func (srv *server) serveConn(conn *quic.Conn) {
	for {
		str, err := conn.AcceptStream(context.Background())
		if err != nil {
			return // connection closed
		}
		go srv.serveStream(str)
	}
}

func (srv *server) serveStream(str *quic.Stream) {
	id := int64(str.StreamID())
	// The request is one line (at most the reader's 4096 bytes), normally followed
	// by FIN, or in an upload by the body; accept either end.
	br := bufio.NewReader(str)
	raw, err := br.ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		str.CancelRead(errBadRequest)
		str.CancelWrite(errBadRequest)
		return
	}
	line := strings.TrimRight(string(raw), "\r\n")
	if put, ok := strings.CutPrefix(line, "PUT /"); ok {
		srv.store(str, br, put)
		return
	}
	name, ok := strings.CutPrefix(line, "GET /")
	if !ok {
		str.CancelRead(errBadRequest)
		str.CancelWrite(errBadRequest)
		return
	}
	// Cleaning against "/" keeps the path inside LL_WWW whatever the client sent.
	f, err := os.Open(filepath.Join(srv.www, filepath.Clean("/"+name)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "quic-go: request for %q: %v\n", name, err)
		str.CancelWrite(errNotFound)
		return
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}

	srv.app.event("request_start", id, size)
	n, err := io.Copy(str, f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "quic-go: sending %q on stream %d: %v\n", name, id, err)
		str.CancelWrite(errNotFound)
		return
	}
	str.Close()
	srv.app.event("request_done", id, n)
}

// store writes an upload's body to LL_DOWNLOADS/NAME (a plain name, nothing that
// leaves the directory) and answers with FIN once it has every byte.
func (srv *server) store(str *quic.Stream, body io.Reader, name string) {
	id := int64(str.StreamID())
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		str.CancelRead(errBadRequest)
		str.CancelWrite(errBadRequest)
		return
	}
	if err := os.MkdirAll(srv.downloads, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "quic-go: LL_DOWNLOADS: %v\n", err)
		str.CancelRead(errNotFound)
		str.CancelWrite(errNotFound)
		return
	}
	f, err := os.Create(filepath.Join(srv.downloads, name))
	if err != nil {
		fmt.Fprintf(os.Stderr, "quic-go: storing %q: %v\n", name, err)
		str.CancelRead(errNotFound)
		str.CancelWrite(errNotFound)
		return
	}
	srv.app.event("request_start", id, 0)
	n, err := io.Copy(f, body)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "quic-go: receiving %q on stream %d after %d bytes: %v\n", name, id, n, err)
		str.CancelWrite(errBadRequest)
		return
	}
	srv.app.event("request_done", id, n)
	str.Close()
}
