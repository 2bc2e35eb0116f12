// Command qbench-quicgo is quic-go's HTTP/3 client as a qbench contestant: `qbench --client
// quic-go` runs one process per connection. It fetches every URL on one QUIC connection and
// prints fetch lines (crates/core/src/client_program/lines.rs) on stdout, one JSON object a
// line, so that its own timings reach the run report; diagnostics go to stderr.
//
// Exit status: 0 if every request got 200 and a whole body, 1 otherwise, 2 for bad usage.
// With QLOGDIR set, the connection writes a qlog there.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
	"golang.org/x/sys/unix"
)

// pattern must match PAYLOAD_PATTERN in crates/core/src/wire.rs.
const pattern = "qbench-payload:0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJK\r\n"

const readSize = 64 << 10

// repeated holds enough of the pattern that any read chunk, at any phase, compares in one go.
var repeated = []byte(strings.Repeat(pattern, readSize/len(pattern)+2))

// One struct per event, so that each line carries exactly the fields the parser accepts
// (it denies unknown ones).
type zeroLine struct {
	Event       string `json:"event"`
	MonotonicUs int64  `json:"monotonic_us"`
}

type versionLine struct {
	Event   string `json:"event"`
	Version string `json:"version"`
}

type connLine struct {
	Event       string `json:"event"`
	Conn        int    `json:"conn"`
	StartUs     int64  `json:"start_us"`
	HandshakeUs *int64 `json:"handshake_us,omitempty"`
	Error       string `json:"error,omitempty"`
	ErrorKind   string `json:"error_kind,omitempty"`
}

type requestLine struct {
	Event     string `json:"event"`
	URL       string `json:"url"`
	Conn      int    `json:"conn"`
	StartUs   int64  `json:"start_us"`
	HeadersUs *int64 `json:"headers_us,omitempty"`
	DoneUs    int64  `json:"done_us"`
	Bytes     int64  `json:"bytes"`
	Status    int    `json:"status,omitempty"`
	Verified  *bool  `json:"verified,omitempty"`
	Error     string `json:"error,omitempty"`
	ErrorKind string `json:"error_kind,omitempty"`
}

// printer writes fetch lines. Requests finish on many goroutines and a line must never
// interleave with another; os.Stdout is unbuffered, so each line leaves in one write.
type printer struct {
	mu   sync.Mutex
	enc  *json.Encoder
	zero time.Time
}

func (p *printer) emit(v any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "qbench-quicgo: stdout: %v\n", err)
	}
}

// us places t on the program's clock. Sub uses Go's monotonic reading, which is
// CLOCK_MONOTONIC on Linux: the clock the zero line names.
func (p *printer) us(t time.Time) int64 { return int64(t.Sub(p.zero) / time.Microsecond) }

func ptr[T any](v T) *T { return &v }

func usageError(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "qbench-quicgo: "+format+"\n", a...)
	os.Exit(2)
}

func quicGoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/quic-go/quic-go" {
				return "quic-go " + cmp.Or(d.Replace, d).Version
			}
		}
	}
	return "quic-go (unknown)"
}

var errMismatch = errors.New("body differs from the payload pattern")

// readBody reads body to its end and returns how many bytes it held; with check, it stops
// at the first byte that differs from the pattern.
func readBody(body io.Reader, check bool) (int64, error) {
	buf := make([]byte, readSize)
	var off int64
	for {
		n, err := body.Read(buf)
		if check && n > 0 {
			phase := int(off % int64(len(pattern)))
			if want := repeated[phase : phase+n]; !bytes.Equal(buf[:n], want) {
				i := 0
				for buf[i] == want[i] {
					i++
				}
				return off + int64(i), fmt.Errorf("%w at offset %d", errMismatch, off+int64(i))
			}
		}
		off += int64(n)
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

func is[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}

// kindOf sorts a failure into qbench's error kinds; ctx is the deadline it ran under.
func kindOf(ctx context.Context, err error) string {
	var ne net.Error
	te, transport := errors.AsType[*quic.TransportError](err)
	he, h3 := errors.AsType[*http3.Error](err)
	switch {
	case errors.Is(err, errMismatch):
		return "body_mismatch"
	// Once the deadline passed, whatever the stream reports (often our own cancellation of
	// it) is the deadline's doing.
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.ErrUnexpectedEOF): // http3's body: the stream ended before Content-Length
		return "short_body"
	case strings.Contains(err.Error(), "peer sent too much data"): // http3's body, unexported
		return "long_body"
	case is[*tls.CertificateVerificationError](err), is[x509.UnknownAuthorityError](err),
		is[x509.HostnameError](err), is[tls.AlertError](err),
		transport && te.ErrorCode.IsCryptoError(): // a TLS alert, sent or received, in QUIC
		return "tls"
	case errors.Is(err, syscall.ECONNREFUSED), transport && te.ErrorCode == quic.ConnectionRefused:
		return "refused"
	// A local HTTP/3 error means we closed the stream or connection over what the server sent.
	case transport, h3 && !he.Remote, is[*quic.VersionNegotiationError](err):
		return "protocol"
	case h3, is[*quic.StreamError](err), is[*quic.ApplicationError](err), is[*quic.StatelessResetError](err):
		return "reset"
	}
	return "io"
}

// dial opens the run's one connection itself rather than leaving it to
// http3.Transport.RoundTrip: the Transport dials lazily inside the first request, dials again
// after a failed dial and retries requests on a new connection, and a run must time exactly
// one handshake.
func dial(ctx context.Context, u *url.URL, pool *x509.CertPool, timeout time.Duration) (*quic.Conn, error) {
	tlsConf := &tls.Config{RootCAs: pool, ServerName: u.Hostname(), NextProtos: []string{http3.NextProtoH3}}
	conf := &quic.Config{
		HandshakeIdleTimeout: timeout, // -timeout, not quic-go's 5 s default, bounds a silent peer
		MaxIncomingStreams:   -1,      // as http3.Transport: a server opens no request streams
		Tracer:               qlog.DefaultConnectionTracer,
	}
	conn, err := quic.DialAddrEarly(ctx, net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "443")), tlsConf, conf)
	if err != nil {
		return nil, err
	}
	// Without a session ticket DialAddrEarly returns at handshake completion anyway; waiting
	// keeps handshake_us right should 0-RTT ever be on.
	select {
	case <-conn.HandshakeComplete():
		return conn, nil
	case <-conn.Context().Done():
		return nil, context.Cause(conn.Context())
	case <-ctx.Done():
		conn.CloseWithError(0, "")
		return nil, ctx.Err()
	}
}

// wantBytes is N for a /bytes/N URL, else -1.
func wantBytes(u *url.URL) int64 {
	if rest, ok := strings.CutPrefix(u.Path, "/bytes/"); ok {
		if n, err := strconv.ParseInt(rest, 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

type fetcher struct {
	p       *printer
	cc      *http3.ClientConn
	timeout time.Duration
	verify  bool
}

// fetch GETs one URL and prints its line; it reports whether it got 200 and a whole body.
// sent is called once its request headers are written (or the request failed), so that the
// next request may go: streams then open in the order the URLs were given.
func (f *fetcher) fetch(raw string, u *url.URL, sent func()) bool {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sent() }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, raw, nil)
	l := requestLine{Event: "request", URL: raw}
	if f.verify {
		l.Verified = ptr(false)
	}
	fail := func(err error, kind string) bool {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err) // say why the stream was cancelled
		}
		l.DoneUs = f.p.us(time.Now())
		l.Error, l.ErrorKind = err.Error(), kind
		f.p.emit(l)
		fmt.Fprintf(os.Stderr, "qbench-quicgo: %s: %s: %v\n", raw, l.ErrorKind, err)
		return false
	}
	l.StartUs = f.p.us(time.Now())
	if err != nil {
		return fail(err, kindOf(ctx, err))
	}
	rsp, err := f.cc.RoundTrip(req)
	headers := time.Now()
	sent()
	if err != nil {
		return fail(err, kindOf(ctx, err))
	}
	l.HeadersUs, l.Status = ptr(f.p.us(headers)), rsp.StatusCode
	ok := rsp.StatusCode == http.StatusOK
	l.Bytes, err = readBody(rsp.Body, f.verify && ok)
	rsp.Body.Close()
	if !ok {
		return fail(fmt.Errorf("status %s", rsp.Status), "status")
	}
	if err != nil {
		return fail(err, kindOf(ctx, err))
	}
	want := wantBytes(u)
	if want < 0 {
		want = rsp.ContentLength
	}
	switch {
	case want >= 0 && l.Bytes < want:
		return fail(fmt.Errorf("body ended at %d of %d bytes", l.Bytes, want), "short_body")
	case want >= 0 && l.Bytes > want:
		return fail(fmt.Errorf("body of %d bytes, %d expected", l.Bytes, want), "long_body")
	}
	l.DoneUs = f.p.us(time.Now())
	if f.verify {
		l.Verified = ptr(true)
	}
	f.p.emit(l)
	return true
}

func main() {
	// One instant for both clocks: qbench places every later time by monotonic_us.
	zero := time.Now()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		fmt.Fprintf(os.Stderr, "qbench-quicgo: CLOCK_MONOTONIC: %v\n", err)
		os.Exit(1)
	}

	caPath := flag.String("ca", "", "PEM certificate to trust (required)")
	streams := flag.Int("streams", 0, "requests in flight at once (0: all)")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of the handshake and of each request")
	verify := flag.Bool("verify", false, "check every body byte against qbench's payload pattern")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: qbench-quicgo -ca FILE [-streams N] [-timeout DURATION] [-verify] URL...")
		flag.PrintDefaults()
	}
	flag.Parse()
	switch {
	case *caPath == "":
		usageError("-ca is required")
	case flag.NArg() == 0:
		usageError("no URL to fetch")
	case *streams < 0 || *timeout <= 0:
		usageError("-streams must be 0 or more, -timeout positive")
	}
	raws := flag.Args()
	urls := make([]*url.URL, len(raws))
	for i, raw := range raws {
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			usageError("%v", err)
		case u.Scheme != "https" || u.Host == "":
			usageError("%s: not an https URL", raw)
		case i > 0 && u.Host != urls[0].Host:
			usageError("%s: every URL must name %s, the one connection's server", raw, urls[0].Host)
		}
		urls[i] = u
	}
	pemBytes, err := os.ReadFile(*caPath)
	if err != nil {
		usageError("-ca: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		usageError("-ca %s: no PEM certificate in it", *caPath)
	}

	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	p := &printer{enc: enc, zero: zero}
	p.emit(zeroLine{Event: "zero", MonotonicUs: ts.Sec*1_000_000 + ts.Nsec/1_000})
	p.emit(versionLine{Event: "version", Version: quicGoVersion()})

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	conn, err := dial(ctx, urls[0], pool, *timeout)
	handshake := time.Now()
	cl := connLine{Event: "connection", StartUs: p.us(start)}
	if err != nil {
		cl.Error, cl.ErrorKind = err.Error(), kindOf(ctx, err)
		cancel()
		p.emit(cl)
		fmt.Fprintf(os.Stderr, "qbench-quicgo: connection: %s: %v\n", cl.ErrorKind, err)
		now := p.us(time.Now())
		for _, raw := range raws {
			l := requestLine{Event: "request", URL: raw, StartUs: now, DoneUs: now,
				Error: "no connection: " + cl.Error, ErrorKind: cl.ErrorKind}
			if *verify {
				l.Verified = ptr(false)
			}
			p.emit(l)
		}
		os.Exit(1)
	}
	cancel()
	cl.HandshakeUs = ptr(p.us(handshake))
	p.emit(cl)

	// DisableCompression: the body is counted as the server sent it, without Accept-Encoding.
	tr := &http3.Transport{DisableCompression: true}
	f := &fetcher{p: p, cc: tr.NewClientConn(conn), timeout: *timeout, verify: *verify}
	slots := make(chan struct{}, min(cmp.Or(*streams, len(urls)), len(urls)))
	var wg sync.WaitGroup
	var failed atomic.Bool
	prev := make(chan struct{})
	close(prev)
	for i, raw := range raws {
		slots <- struct{}{}
		next := make(chan struct{})
		sent := sync.OnceFunc(func() { close(next) })
		wait := prev
		wg.Go(func() {
			defer func() { <-slots }()
			defer sent() // a request that never wrote its headers must still let the next go
			<-wait
			if !f.fetch(raw, urls[i], sent) {
				failed.Store(true)
			}
		})
		prev = next
	}
	wg.Wait()
	conn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
	if failed.Load() {
		os.Exit(1)
	}
}
