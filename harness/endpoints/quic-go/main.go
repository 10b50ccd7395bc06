// Command endpoint is longlook's quic-go endpoint: an HTTP/0.9 ("hq-interop")
// client or server driven entirely by the environment described in
// docs/endpoints.md. It exits 127 for any option quic-go cannot honour, so the
// harness skips instead of measuring something other than what was asked.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
)

const (
	stackName  = "quic-go"
	modulePath = "github.com/quic-go/quic-go"
	alpn       = "hq-interop"
	// The name harness/testbed/certs.py puts in the test certificate.
	serverName = "server.longlook.test"

	defaultDatagramSize = 1252
	defaultFlowWindow   = 64 << 20
	// quic-go's sender starts at a fixed 32 packets; LL_INITIAL_WINDOW is accepted
	// only when it asks for exactly that.
	fixedInitialWindowPackets = 32
	// quic-go pads Initials to at least 1200 bytes and never builds packets larger
	// than its 1452-byte buffers, so sizes outside this range cannot be honoured.
	minDatagramSize = 1200
	maxDatagramSize = 1452
)

// settings is the parsed, validated environment shared by both roles.
type settings struct {
	role, testcase string
	upload         bool // LL_DIRECTION=upload: the client sends (PUT), the server stores
	cc             string
	datagramSize   uint16
	flowWindow     uint64
	timeout        time.Duration
}

// unsupported ends the process the way the contract asks for options we cannot honour.
func unsupported(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "quic-go: "+format+"\n", args...)
	os.Exit(127)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "quic-go: "+format+"\n", args...)
	os.Exit(1)
}

// stackVersion reads the linked quic-go version from the build info, so the
// version record can never drift from go.mod.
func stackVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == modulePath {
				return strings.TrimPrefix(dep.Version, "v")
			}
		}
	}
	return "unknown"
}

func parseSettings() settings {
	s := settings{role: os.Getenv("ROLE"), testcase: os.Getenv("TESTCASE")}
	if s.role != "client" && s.role != "server" {
		unsupported("unknown ROLE %q", s.role)
	}
	switch s.testcase {
	case "transfer", "multiplexing", "appidle":
	default:
		unsupported("unsupported TESTCASE %q", s.testcase)
	}
	switch d := os.Getenv("LL_DIRECTION"); d {
	case "", "download":
	case "upload":
		s.upload = true
	default:
		unsupported("LL_DIRECTION=%q unsupported (download or upload)", d)
	}

	// quic-go hard-wires its sender to Reno mode (the CUBIC code path is internal
	// and unreachable through the public API).
	switch cc := os.Getenv("LL_CC"); cc {
	case "", "newreno":
		s.cc = "newreno"
	default:
		unsupported("LL_CC=%s not supported: quic-go %s offers only newreno", cc, stackVersion())
	}

	if iw := os.Getenv("LL_INITIAL_WINDOW"); iw != "" {
		if n, err := strconv.Atoi(iw); err != nil || n != fixedInitialWindowPackets {
			unsupported("LL_INITIAL_WINDOW=%s not supported: quic-go's initial window is fixed at %d packets",
				iw, fixedInitialWindowPackets)
		}
	}

	s.datagramSize = defaultDatagramSize
	if v := os.Getenv("LL_MAX_DATAGRAM_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < minDatagramSize || n > maxDatagramSize {
			unsupported("LL_MAX_DATAGRAM_SIZE=%s not supported: quic-go needs %d..%d",
				v, minDatagramSize, maxDatagramSize)
		}
		s.datagramSize = uint16(n)
	}

	s.flowWindow = defaultFlowWindow
	if v := os.Getenv("LL_FLOW_WINDOW"); v != "" {
		n, err := strconv.ParseUint(v, 10, 62)
		if err != nil || n == 0 {
			unsupported("LL_FLOW_WINDOW=%s is not a positive byte count below 2^62", v)
		}
		s.flowWindow = n
	}

	// LL_OFFLOAD=off: one datagram per send call. quic-go's only offload is GSO
	// (it reads with recvmmsg, not GRO), and its switch is this variable, read
	// when a connection's socket is set up.
	switch v := os.Getenv("LL_OFFLOAD"); v {
	case "", "on":
	case "off":
		os.Setenv("QUIC_GO_DISABLE_GSO", "true")
	default:
		unsupported("LL_OFFLOAD=%s: on or off", v)
	}

	if v := os.Getenv("LL_TIMEOUT_S"); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs <= 0 {
			unsupported("LL_TIMEOUT_S=%s is not a positive number of seconds", v)
		}
		s.timeout = time.Duration(secs * float64(time.Second))
	}
	return s
}

// quicConfig turns the settings into quic-go's configuration. Path MTU discovery
// is off so that LL_MAX_DATAGRAM_SIZE is the size of every full packet, which the
// properties rely on when they count packets in bytes.
func quicConfig(s settings, tracer *qlogTracer) *quic.Config {
	return &quic.Config{
		InitialStreamReceiveWindow:     s.flowWindow,
		MaxStreamReceiveWindow:         s.flowWindow,
		InitialConnectionReceiveWindow: s.flowWindow,
		MaxConnectionReceiveWindow:     s.flowWindow,
		InitialPacketSize:              s.datagramSize,
		DisablePathMTUDiscovery:        true,
		// Long enough for appidle think times and slow emulated links; the harness
		// bounds the run with LL_TIMEOUT_S anyway.
		MaxIdleTimeout:       120 * time.Second,
		HandshakeIdleTimeout: 20 * time.Second,
		Tracer:               tracer.newTrace,
	}
}

func main() {
	s := parseSettings()
	if s.timeout > 0 {
		time.AfterFunc(s.timeout, func() { fail("gave up after LL_TIMEOUT_S=%s", os.Getenv("LL_TIMEOUT_S")) })
	}

	app, err := openAppLog(os.Getenv("LL_APPLOG"), s.cc)
	if err != nil {
		fail("applog: %v", err)
	}
	keyLog, err := openKeyLog(os.Getenv("SSLKEYLOGFILE"))
	if err != nil {
		fail("key log: %v", err)
	}
	tracer := newQlogTracer(os.Getenv("QLOGDIR"))

	if s.role == "server" {
		err = runServer(s, app, keyLog, tracer)
	} else {
		err = runClient(s, app, keyLog, tracer)
	}
	// Closed connections hand their last qlog events to a writer goroutine; wait
	// for those files to be complete before the process goes away.
	tracer.wait(3 * time.Second)
	app.close()
	if keyLog != nil {
		keyLog.Close()
	}
	if err != nil {
		fail("%v", err)
	}
}
