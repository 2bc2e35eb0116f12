// Command qbench-quicgo-server is quic-go's HTTP/3 server serving static files, started by
// qbench as the server side of a benchmark. It speaks HTTP/3 only (no TCP listener) and logs
// no requests, so that the server does no work beyond what is being measured.
//
// Build it (it is its own module, like clients/quicgo) with
//
//	go -C servers/quicgo build -o "$PWD/qbench-quicgo-server" .
//
// from the workspace root, or `go build -o qbench-quicgo-server .` in this directory; qbench
// finds the binary on PATH or at QBENCH_QUICGO_SERVER.
//
// Usage: qbench-quicgo-server -addr HOST:PORT -cert PEM -key PEM -root DIR
// [-max-streams N] [-idle DURATION]
//
// Once the UDP socket is bound it prints one line, `listening HOST:PORT`, on stdout (qbench
// itself waits for the port in the kernel's socket table, as for every server).
// `-version` prints quic-go's version. SIGTERM or SIGINT closes the server and exits 0. Bad
// usage or a bind failure exits non-zero with one line on stderr.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// version is quic-go's module version, as the binary was built with it.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "quic-go (unknown version)"
	}
	for _, d := range info.Deps {
		if d.Path == "github.com/quic-go/quic-go" {
			return "quic-go " + d.Version + " (" + info.GoVersion + ")"
		}
	}
	return "quic-go (unknown version)"
}

type options struct {
	addr, cert, key, root string
	maxStreams            int64
	idle                  time.Duration
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("qbench-quicgo-server", flag.ContinueOnError)
	// The flag package's own report spans several lines; the launcher wants one.
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.addr, "addr", "", "UDP address to listen on, HOST:PORT")
	fs.StringVar(&o.cert, "cert", "", "certificate chain, PEM")
	fs.StringVar(&o.key, "key", "", "private key, PEM")
	fs.StringVar(&o.root, "root", "", "directory to serve")
	fs.Int64Var(&o.maxStreams, "max-streams", 100, "concurrent bidirectional streams a client may open")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "QUIC idle timeout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			os.Exit(0)
		}
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.addr == "", o.cert == "", o.key == "", o.root == "":
		return o, errors.New("-addr, -cert, -key and -root are required")
	case o.maxStreams <= 0:
		return o, fmt.Errorf("-max-streams must be positive, not %d", o.maxStreams)
	case o.idle <= 0:
		return o, fmt.Errorf("-idle must be positive, not %v", o.idle)
	}
	// Checked up front so that a wrong root fails the run at start, not as a stream of 404s.
	if st, err := os.Stat(o.root); err != nil {
		return o, err
	} else if !st.IsDir() {
		return o, fmt.Errorf("-root %s is not a directory", o.root)
	}
	return o, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "qbench-quicgo-server:", err)
	os.Exit(1)
}

func main() {
	// qbench records what served each run.
	if len(os.Args) == 2 && os.Args[1] == "-version" {
		fmt.Println(version())
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "qbench-quicgo-server:", err)
		os.Exit(2)
	}
	cert, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		fail(err)
	}

	// Registered before binding, so that a signal arriving right after the listening line
	// is never lost to the default action.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	conn, err := net.ListenPacket("udp", o.addr)
	if err != nil {
		fail(err)
	}
	server := &http3.Server{
		Handler: http.FileServer(http.Dir(o.root)),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS13,
		},
		QUICConfig: &quic.Config{
			MaxIncomingStreams: o.maxStreams,
			MaxIdleTimeout:     o.idle,
		},
	}

	closed := make(chan struct{})
	go func() {
		<-sigs
		// Close rather than Shutdown: the benchmark is over when qbench signals, and a
		// graceful drain would only delay the exit it is waiting for.
		server.Close()
		// Serve leaves a connection it was handed open.
		conn.Close()
		close(closed)
	}()

	fmt.Printf("listening %s\n", conn.LocalAddr())
	if err := server.Serve(conn); !errors.Is(err, http.ErrServerClosed) {
		fail(err)
	}
	<-closed
}
