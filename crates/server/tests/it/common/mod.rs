//! Fixtures for the hostile-peer tests: an in-process server on loopback with some options
//! changed, TLS and QUIC clients that trust its certificate, and bounded waits.

#![allow(dead_code, unreachable_pub)]

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use qbench_server::{InProcess, ServerOptions};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

pub(crate) mod needs;

/// Every wait in these tests ends by this bound; the bounds under test are seconds at most.
pub const WAIT: Duration = Duration::from_secs(20);

/// An in-process server that counts in the process-wide tallies (`qbench_stack::activity`)
/// for as long as it lives, so that a test reading those tallies (`tallies_alone`) waits
/// until it is the only one writing to them.
pub struct Served {
    server: InProcess,
    _counted: Counted,
}

impl std::ops::Deref for Served {
    type Target = InProcess;
    fn deref(&self) -> &InProcess {
        &self.server
    }
}

pub fn server(change: impl FnOnce(&mut ServerOptions)) -> Served {
    server_on(1, change)
}

/// A server on a runtime of `threads` workers (and as many UDP sockets).
pub fn server_on(threads: usize, change: impl FnOnce(&mut ServerOptions)) -> Served {
    let mut o = ServerOptions::loopback();
    change(&mut o);
    let counted = Counted::new();
    Served {
        server: InProcess::start(o, threads).expect("server starts"),
        _counted: counted,
    }
}

/// Who uses the tallies: servers alive in other tests, and whether a test reads them alone.
/// A test's threads start servers freely while no test reads alone, so a test with two servers
/// never waits on itself; a reading test waits for every other server to end.
#[derive(Default)]
struct Tallies {
    servers: usize,
    reader: bool,
}

static TALLIES: Mutex<Tallies> = Mutex::new(Tallies {
    servers: 0,
    reader: false,
});
static CHANGED: Condvar = Condvar::new();

thread_local! {
    static READING: Cell<bool> = const { Cell::new(false) };
}

fn tallies() -> MutexGuard<'static, Tallies> {
    TALLIES.lock().unwrap_or_else(|e| e.into_inner())
}

struct Counted(bool);

impl Counted {
    fn new() -> Self {
        if READING.get() {
            return Self(false);
        }
        let mut t = tallies();
        while t.reader {
            t = CHANGED.wait(t).unwrap_or_else(|e| e.into_inner());
        }
        t.servers += 1;
        Self(true)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.0 {
            tallies().servers -= 1;
            CHANGED.notify_all();
        }
    }
}

/// Held by a test that reads the process-wide tallies: no other test's server runs meanwhile.
pub struct Alone;

/// Waits until no other test has a server, then keeps others from starting one until the
/// returned guard goes. The calling thread's own servers are not counted.
pub fn tallies_alone() -> Alone {
    let mut t = tallies();
    while t.reader || t.servers > 0 {
        t = CHANGED.wait(t).unwrap_or_else(|e| e.into_inner());
    }
    t.reader = true;
    READING.set(true);
    Alone
}

impl Drop for Alone {
    fn drop(&mut self) {
        READING.set(false);
        tallies().reader = false;
        CHANGED.notify_all();
    }
}

fn roots(pem: &str) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    roots
}

pub fn client_tls(pem: &str, alpn: &[u8]) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(pem))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    cfg
}

pub async fn tls(s: &InProcess, alpn: &[u8]) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(s.local_addr()).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_tls(s.cert_pem(), alpn)));
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(WAIT, connector.connect(name, tcp))
        .await
        .expect("handshake within the bound")
        .expect("handshake")
}

pub fn quic_client(pem: &str) -> quinn::Endpoint {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(client_tls(pem, b"h3")).unwrap();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    ep
}

pub async fn quic(
    ep: &quinn::Endpoint,
    addr: SocketAddr,
) -> Result<quinn::Connection, quinn::ConnectionError> {
    let connecting = ep.connect(addr, "localhost").unwrap();
    tokio::time::timeout(WAIT, connecting)
        .await
        .expect("QUIC handshake ends within the bound")
}

/// Reads until the peer closes; what was read, or the error that ended it.
pub async fn read_until_closed<R: AsyncReadExt + Unpin>(
    r: &mut R,
) -> Result<Vec<u8>, std::io::Error> {
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, r.read_to_end(&mut out))
        .await
        .expect("the server closes within the bound")?;
    Ok(out)
}

/// Polls `cond` every 10 ms until it holds; panics after `WAIT`.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The first bytes of a TLS ClientHello record that announces more than it sends.
pub const HALF_CLIENT_HELLO: &[u8] = &[
    0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
];

/// A minimal HTTP/3 request: QPACK with static-table references and literals only.
pub fn h3_request(method_index: u8, path: &str, body: usize) -> Vec<u8> {
    let mut fields = vec![0x00, 0x00, 0xc0 | method_index, 0xc0 | 23];
    for (name_index, value) in [(0u8, "localhost"), (1, path)] {
        fields.push(0x50 | name_index);
        fields.push(value.len() as u8);
        fields.extend_from_slice(value.as_bytes());
    }
    let mut out = vec![0x01, fields.len() as u8];
    out.extend_from_slice(&fields);
    if body > 0 {
        out.push(0x00);
        out.extend_from_slice(&(0x8000_0000u32 | body as u32).to_be_bytes());
        out.resize(out.len() + body, b'x');
    }
    out
}

pub const GET: u8 = 17;
pub const POST: u8 = 20;
