//! The TLS records the server writes, as a client reads them off the wire: over a path of
//! 1400-byte segments (the client's TCP_MAXSEG, which its SYN announces), a response's head
//! comes in a record of one segment and the records of a connection's first flight, and of
//! the first after an idle second, end within TCP's initial window of 10 segments, so no head
//! waits for a second flight; the rest of a bulk body comes in full records.

use crate::common;

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use qbench_core::report::sender::TlsRecords;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};

/// The MSS the client announces: loopback's own would carry a full record in one segment.
const MSS: libc::c_int = 1400;
/// A full record on the wire: header, 16 KiB of plaintext, content type and AEAD tag.
const FULL: usize = 5 + 16 * 1024 + 1 + 16;
const BODY: usize = 1_000_000;
/// Linux's initial window, in segments.
const INITIAL_WINDOW: usize = 10;

/// The sizes (header included) of the records read through it, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<usize>>>);

impl Seen {
    fn now(&self) -> Vec<usize> {
        self.0.lock().unwrap().clone()
    }
}

/// A TCP stream that notes the TLS records it reads.
struct Tap {
    tcp: TcpStream,
    seen: Seen,
    head: Vec<u8>,
    body_left: usize,
}

impl Tap {
    fn note(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.body_left > 0 {
                let n = self.body_left.min(data.len());
                self.body_left -= n;
                data = &data[n..];
                continue;
            }
            let n = (5 - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.head.len() == 5 {
                self.body_left = usize::from(u16::from_be_bytes([self.head[3], self.head[4]]));
                self.seen.0.lock().unwrap().push(5 + self.body_left);
                self.head.clear();
            }
        }
    }
}

impl AsyncRead for Tap {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.tcp).poll_read(cx, buf);
        let new = buf.filled()[before..].to_vec();
        self.note(&new);
        r
    }
}

impl AsyncWrite for Tap {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// The segment size of the client's socket, which the server's matches: the MSS announced
/// less TCP's options.
fn segment(tcp: &TcpStream) -> usize {
    // SAFETY: tcp_info is plain data; the kernel fills at most `len` bytes of it.
    let info = unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            tcp.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        assert_eq!(rc, 0, "TCP_INFO");
        info
    };
    info.tcpi_snd_mss as usize
}

/// A TLS connection over segments of at most `MSS`, its records noted from the first byte.
async fn connect(
    s: &qbench_server::InProcess,
    alpn: &[u8],
) -> (tokio_rustls::client::TlsStream<Tap>, Seen, usize) {
    let sock = TcpSocket::new_v4().unwrap();
    // SAFETY: setting an int option on a socket this function owns.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&MSS as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "TCP_MAXSEG");
    let tcp = sock.connect(s.local_addr()).await.unwrap();
    let seg = segment(&tcp);
    assert!(seg <= MSS as usize, "segment {seg}");
    let seen = Seen::default();
    let tap = Tap {
        tcp,
        seen: seen.clone(),
        head: Vec::new(),
        body_left: 0,
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_tls(s.cert_pem(), alpn)));
    let name = ServerName::try_from("localhost").unwrap();
    let tls = tokio::time::timeout(WAIT, connector.connect(name, tap))
        .await
        .expect("handshake within the bound")
        .expect("handshake");
    (tls, seen, seg)
}

/// Sends GET requests of `/bytes/{BODY}` over h1 or h2 and reads their bodies whole.
enum Client {
    H1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

impl Client {
    async fn new(tls: tokio_rustls::client::TlsStream<Tap>, h2: bool) -> Self {
        let io = TokioIo::new(tls);
        if h2 {
            let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .handshake(io)
                .await
                .unwrap();
            tokio::spawn(conn);
            Self::H2(send)
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            Self::H1(send)
        }
    }

    async fn fetch(&mut self) -> usize {
        let req = Request::get(format!("https://localhost/bytes/{BODY}"))
            .header("host", "localhost")
            .body(Empty::new())
            .unwrap();
        let resp = match self {
            Self::H1(s) => s.send_request(req).await,
            Self::H2(s) => s.send_request(req).await,
        }
        .expect("a response");
        assert_eq!(resp.status(), 200);
        let body = tokio::time::timeout(WAIT, resp.into_body().collect())
            .await
            .expect("the body within the bound")
            .expect("a body");
        body.to_bytes().len()
    }
}

/// The records of the response, on the wire: from the first of more than 1 KB (session
/// tickets and SETTINGS take a few hundred bytes).
fn response(records: &[usize]) -> &[usize] {
    let start = records
        .iter()
        .position(|&r| r > 1024)
        .unwrap_or(records.len());
    &records[start..]
}

async fn records_of(alpn: &[u8], sizing: TlsRecords) -> (Vec<usize>, Vec<usize>, usize) {
    let s = server(|o| o.tls_records = sizing);
    let (tls, seen, seg) = connect(&s, alpn).await;
    // Whatever came after the handshake: session tickets, h2's SETTINGS, the responses.
    let from = seen.now().len();
    let mut c = Client::new(tls, alpn == b"h2").await;
    assert_eq!(c.fetch().await, BODY);
    let first = seen.now()[from..].to_vec();
    // Longer than any RTO the server could have on loopback, and than its one-second bound.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let from = seen.now().len();
    assert_eq!(c.fetch().await, BODY);
    let after_idle = seen.now()[from..].to_vec();
    (first, after_idle, seg)
}

fn assert_first_flight_fits_then_full(what: &str, records: &[usize], seg: usize) {
    // The response's head comes in a segment of its own, and the next record fills what the
    // window has left and ends within it (the session ticket, SETTINGS and the head's segment
    // may still be in flight, or acknowledged already on loopback: 6 to 10 segments). Before,
    // the head came in a full record of 12 segments.
    let r = response(records);
    assert!(r.len() >= 2, "{what}: {records:?}");
    assert_eq!(r[0], seg, "{what}: the head's record, of {:?}", &r[..2]);
    assert!(
        (5 * seg..=INITIAL_WINDOW * seg).contains(&r[1]),
        "{what}: the response's second record is {} bytes (segments of {seg}): {:?}",
        r[1],
        &r[..r.len().min(8)]
    );
    let full = records.iter().filter(|&&r| r == FULL).count();
    // Most of a 1 MB body in full records (61 of them would carry all of it).
    assert!(
        full * 16 * 1024 >= BODY * 85 / 100,
        "{what}: {full} full records of {}",
        records.len()
    );
}

#[tokio::test]
async fn first_flights_end_within_the_initial_window() {
    for (alpn, name) in [(&b"h2"[..], "h2"), (b"http/1.1", "h1")] {
        let (first, after_idle, seg) = records_of(alpn, TlsRecords::Dynamic).await;
        eprintln!(
            "{name}: segment {seg} bytes; first {} records {:?}; after idle {:?}",
            first.len(),
            &first[..first.len().min(20)],
            &after_idle[..after_idle.len().min(20)]
        );
        assert_first_flight_fits_then_full(&format!("{name} start"), &first, seg);
        assert_first_flight_fits_then_full(&format!("{name} after idle"), &after_idle, seg);
    }
}

#[tokio::test]
async fn full_records_from_the_start_when_asked() {
    let (first, after_idle, _) = records_of(b"h2", TlsRecords::Full).await;
    assert_eq!(response(&first)[0], FULL, "{first:?}");
    assert_eq!(response(&after_idle)[0], FULL, "{after_idle:?}");
}
