// Client role: fetches every URL in REQUESTS over one connection, one
// bidirectional stream per request, sequentially (transfer), all at once
// (multiplexing) or with LL_THINK_MS pauses (appidle), and writes each response
// to LL_DOWNLOADS/NAME; in an upload (LL_DIRECTION=upload) it sends each
// LL_WWW/NAME instead, as PUT /NAME, and waits for the server's FIN.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

func runClient(s settings, app *appLog, keyLog *os.File, tracer *qlogTracer) error {
	authority, names, err := parseRequests(os.Getenv("REQUESTS"))
	if err != nil {
		return err
	}
	downloads := os.Getenv("LL_DOWNLOADS")
	if downloads == "" {
		downloads = "/downloads"
	}

	think := time.Duration(0)
	if v := os.Getenv("LL_THINK_MS"); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms < 0 {
			unsupported("LL_THINK_MS=%s is not a non-negative number of milliseconds", v)
		}
		think = time.Duration(ms * float64(time.Millisecond))
	}

	// An IP literal is no valid SNI, and Go would send none; some servers want one.
	sni, _, _ := net.SplitHostPort(authority)
	if net.ParseIP(sni) != nil {
		sni = serverName
	}
	tlsConf := &tls.Config{
		// Test certificates are self-signed; QIR clients do not verify either.
		InsecureSkipVerify: true,
		ServerName:         sni,
		NextProtos:         []string{alpn},
		KeyLogWriter:       keyLogWriter(keyLog),
	}
	conn, err := quic.DialAddr(context.Background(), authority, tlsConf, quicConfig(s, tracer))
	if err != nil {
		return fmt.Errorf("dial %s: %w", authority, err)
	}
	transfer := func(name string) (int64, error) { return fetchOne(conn, app, downloads, name) }
	if s.upload {
		www := os.Getenv("LL_WWW")
		if www == "" {
			www = "/www"
		}
		transfer = func(name string) (int64, error) { return uploadOne(conn, app, www, name) }
	}

	switch s.testcase {
	case "multiplexing":
		err = fetchParallel(names, func(name string) error {
			_, err := transfer(name)
			return err
		})
	default:
		// Idle events carry the stream of the request just completed, the one the
		// pause follows.
		var last int64
		for i, name := range names {
			if i > 0 && s.testcase == "appidle" {
				app.event("idle_start", last, 0)
				time.Sleep(think)
				app.event("idle_end", last, 0)
			}
			if last, err = transfer(name); err != nil {
				break
			}
		}
	}
	if err != nil {
		conn.CloseWithError(1, "request failed")
		return err
	}
	conn.CloseWithError(0, "")
	return nil
}

// parseRequests splits REQUESTS into the one authority they share and the names.
func parseRequests(requests string) (authority string, names []string, err error) {
	for _, raw := range strings.Fields(requests) {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || len(u.Path) < 2 {
			return "", nil, fmt.Errorf("bad URL in REQUESTS: %q", raw)
		}
		if authority == "" {
			authority = u.Host
		} else if u.Host != authority {
			return "", nil, fmt.Errorf("REQUESTS name two servers (%s, %s); one connection serves one", authority, u.Host)
		}
		names = append(names, strings.TrimPrefix(u.Path, "/"))
	}
	if len(names) == 0 {
		return "", nil, errors.New("REQUESTS is empty")
	}
	if _, _, err := net.SplitHostPort(authority); err != nil {
		authority = net.JoinHostPort(authority, "443")
	}
	return authority, names, nil
}

func fetchParallel(names []string, fetch func(string) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fetch(name)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fetchOne downloads one file and returns the stream it used.
func fetchOne(conn *quic.Conn, app *appLog, downloads, name string) (int64, error) {
	dest := filepath.Join(downloads, filepath.Clean("/"+name))
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(dest)
	if err != nil {
		return 0, err
	}
	defer f.Close()

	str, err := conn.OpenStreamSync(context.Background())
	if err != nil {
		return 0, fmt.Errorf("open stream for %s: %w", name, err)
	}
	id := int64(str.StreamID())
	app.event("request_start", id, 0)
	if _, err := io.WriteString(str, "GET /"+name+"\r\n"); err != nil {
		return id, fmt.Errorf("request %s: %w", name, err)
	}
	str.Close() // FIN on our side only; the response still arrives
	n, err := io.Copy(f, str)
	if err != nil {
		return id, fmt.Errorf("response %s after %d bytes: %w", name, n, err)
	}
	app.event("request_done", id, n)
	return id, nil
}

// uploadOne sends LL_WWW/NAME as PUT /NAME on a new stream and returns the stream
// once the server's FIN says it stored every byte.
func uploadOne(conn *quic.Conn, app *appLog, www, name string) (int64, error) {
	f, err := os.Open(filepath.Join(www, filepath.Clean("/"+name)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	str, err := conn.OpenStreamSync(context.Background())
	if err != nil {
		return 0, fmt.Errorf("open stream for %s: %w", name, err)
	}
	id := int64(str.StreamID())
	app.event("request_start", id, size)
	if _, err := io.WriteString(str, "PUT /"+name+"\r\n"); err != nil {
		return id, fmt.Errorf("upload %s: %w", name, err)
	}
	n, err := io.Copy(str, f)
	if err != nil {
		return id, fmt.Errorf("upload %s after %d bytes: %w", name, n, err)
	}
	str.Close()
	if _, err := io.Copy(io.Discard, str); err != nil {
		return id, fmt.Errorf("upload %s: the server's answer: %w", name, err)
	}
	app.event("request_done", id, n)
	return id, nil
}
