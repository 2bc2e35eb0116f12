// Command quicgo fetches /bytes/N from qbench-server with quic-go's HTTP/3 client and checks
// every body byte against the payload pattern (crates/core/src/wire.rs: PAYLOAD_PATTERN).
//
// It runs -fetches sequential fetches, each on a new connection, then -concurrent requests at
// once on one connection, and prints one JSON line {ok, hung, errors, bytes}. It exits non-zero
// if any request failed or hung (got no complete answer within -timeout).
//
// By default the client offers Go's default key shares (X25519MLKEM768 first), so its
// ClientHello spans two QUIC Initial packets; -mlkem=false offers X25519 alone (one packet).
// With QLOGDIR set, each connection writes a qlog there.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
)

// pattern must match PAYLOAD_PATTERN in crates/core/src/wire.rs.
const pattern = "qbench-payload:0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJK\r\n"

type summary struct {
	OK     int   `json:"ok"`
	Hung   int   `json:"hung"`
	Errors int   `json:"errors"`
	Bytes  int64 `json:"bytes"`
}

// record counts one request's outcome; it is called from several goroutines.
func (s *summary) record(mu *sync.Mutex, what string, n int64, err error) {
	mu.Lock()
	defer mu.Unlock()
	s.Bytes += n
	switch {
	case err == nil:
		s.OK++
	case errors.Is(err, context.DeadlineExceeded):
		s.Hung++
		fmt.Fprintf(os.Stderr, "%s: hung after %d bytes: %v\n", what, n, err)
	default:
		s.Errors++
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	}
}

// verify reads the body to its end, checking each byte; it returns the bytes read.
func verify(body io.Reader, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := body.Read(buf)
		for i, b := range buf[:n] {
			at := off + int64(i)
			if at >= size {
				return at, fmt.Errorf("body longer than %d bytes", size)
			}
			if b != pattern[at%int64(len(pattern))] {
				return at, fmt.Errorf("wrong byte at offset %d: %#02x", at, b)
			}
		}
		off += int64(n)
		if err == io.EOF {
			if off != size {
				return off, fmt.Errorf("body ended at %d of %d bytes", off, size)
			}
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

// fetch GETs url on client and verifies the answer, all within timeout.
func fetch(client *http.Client, url string, size int64, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %s", resp.Status)
	}
	// RFC 9110 6.6.1: an origin server with a clock sends Date, over HTTP/3 as over h1/h2.
	if _, err := http.ParseTime(resp.Header.Get("Date")); err != nil {
		return 0, fmt.Errorf("no valid Date header (%q)", resp.Header.Get("Date"))
	}
	n, err := verify(resp.Body, size)
	if err != nil && ctx.Err() != nil {
		// A read cut short by the deadline is a hang, whatever error the stream reports.
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return n, err
}

func main() {
	base := flag.String("url-base", "https://127.0.0.1:4433", "server base URL")
	caPath := flag.String("ca", "", "PEM certificate to trust (qbench-server's --cert-out)")
	size := flag.Int64("size", 1000000, "object size: fetch /bytes/N")
	fetches := flag.Int("fetches", 20, "sequential fetches, each on a new connection")
	concurrent := flag.Int("concurrent", 50, "concurrent requests on one connection (0: none)")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of each request")
	mlkem := flag.Bool("mlkem", true, "offer Go's default key shares (X25519MLKEM768: two-packet ClientHello)")
	flag.Parse()

	pool := x509.NewCertPool()
	if *caPath != "" {
		pem, err := os.ReadFile(*caPath)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			fmt.Fprintf(os.Stderr, "cannot use -ca %s: %v\n", *caPath, err)
			os.Exit(2)
		}
	}
	tlsConf := &tls.Config{RootCAs: pool}
	if !*mlkem {
		tlsConf.CurvePreferences = []tls.CurveID{tls.X25519}
	}
	newClient := func() (*http.Client, *http3.Transport) {
		tr := &http3.Transport{
			TLSClientConfig: tlsConf.Clone(),
			QUICConfig:      &quic.Config{Tracer: qlog.DefaultConnectionTracer},
		}
		return &http.Client{Transport: tr}, tr
	}
	url := fmt.Sprintf("%s/bytes/%d", *base, *size)

	var s summary
	var mu sync.Mutex
	for i := 0; i < *fetches; i++ {
		client, tr := newClient()
		n, err := fetch(client, url, *size, *timeout)
		s.record(&mu, fmt.Sprintf("fetch %d", i), n, err)
		tr.Close()
	}
	if *concurrent > 0 {
		client, tr := newClient()
		var wg sync.WaitGroup
		for i := 0; i < *concurrent; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				n, err := fetch(client, url, *size, *timeout)
				s.record(&mu, fmt.Sprintf("concurrent %d", i), n, err)
			}(i)
		}
		wg.Wait()
		tr.Close()
	}

	out, _ := json.Marshal(s)
	fmt.Println(string(out))
	if s.Hung > 0 || s.Errors > 0 {
		os.Exit(1)
	}
}
