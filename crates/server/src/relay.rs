//! The split-connection proxy's upstream side (`qbench proxy`, IMC'17 Section 5.5): each
//! connection a client opens to the proxy gets its own upstream connection to the origin,
//! over HTTP/2 (TCP + TLS) or HTTP/3 (QUIC), opened at its first request. Bodies stream
//! through as they arrive; nothing holds a whole object.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use qbench_core::Protocol;
use tokio::sync::OnceCell;

/// How far the origin may run ahead of a slower client, per stream and per upstream HTTP/2
/// connection: what the proxy buffers at most for one client connection.
pub const RELAY_STREAM_WINDOW: u32 = 2 * 1024 * 1024;
pub const RELAY_CONN_WINDOW: u32 = 8 * 1024 * 1024;

/// What a proxy relays to, and over what.
pub struct Upstream {
    pub proto: Protocol,
    pub addr: SocketAddr,
    /// The origin's name, for SNI and the requests' authority.
    pub server_name: String,
    /// With the ALPN of `proto`.
    pub tls: Arc<rustls::ClientConfig>,
    /// HTTP/3: the endpoint upstream connections leave from (bound where the caller chose:
    /// with a split topology, in the upstream link's namespace).
    pub endpoint: Option<quinn::Endpoint>,
    /// Opening an upstream connection, and waiting for a response head, gives up after this.
    pub timeout: Duration,
    pub stats: Arc<RelayStats>,
}

/// What the proxy carried, per direction.
#[derive(Debug, Default)]
pub struct RelayStats {
    pub requests: AtomicU64,
    /// Upstream connections opened, and those that failed to open.
    pub connects: AtomicU64,
    pub connect_failures: AtomicU64,
    /// Request heads sent upstream (their header bytes: requests carry no body upstream).
    pub bytes_up: AtomicU64,
    /// Response body bytes relayed from the origin to clients.
    pub bytes_down: AtomicU64,
    /// Responses that ended early because the upstream stream broke.
    pub broken: AtomicU64,
}

impl RelayStats {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("connecting upstream to {addr}: {message}")]
    Connect { addr: SocketAddr, message: String },
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    #[error("upstream request failed: {0}")]
    Request(String),
}

impl RelayError {
    fn status(&self) -> StatusCode {
        match self {
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Connect { .. } | Self::Request(_) => StatusCode::BAD_GATEWAY,
        }
    }
}

type H3Send = h3::client::SendRequest<crate::h3_zero_copy::OpenStreams, Bytes>;
type H3Stream = h3::client::RequestStream<crate::h3_zero_copy::BidiStream, Bytes>;

#[derive(Clone)]
enum Sender {
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
    H3(H3Send),
}

/// One client connection's upstream connection, opened at its first request (again at the
/// next one if that failed) and closed with the client's connection (its last handle dropped).
#[derive(Default)]
pub struct UpstreamConn {
    sender: OnceCell<Sender>,
}

async fn within<T>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(limit, f)
        .await
        .map_err(|_| format!("no answer within {limit:?}"))?
}

impl Upstream {
    async fn open(&self) -> Result<Sender, String> {
        let name = rustls::pki_types::ServerName::try_from(self.server_name.clone())
            .map_err(|e| format!("server name {}: {e}", self.server_name))?;
        match self.proto {
            Protocol::H3 => {
                let ep = self.endpoint.as_ref().ok_or("no QUIC endpoint")?;
                let crypto = quinn::crypto::rustls::QuicClientConfig::try_from((*self.tls).clone())
                    .map_err(|e| format!("QUIC TLS config: {e}"))?;
                let cfg = quinn::ClientConfig::new(Arc::new(crypto));
                let conn = ep
                    .connect_with(cfg, self.addr, &self.server_name)
                    .map_err(|e| e.to_string())?;
                let conn = within(self.timeout, async {
                    conn.await.map_err(|e| e.to_string())
                })
                .await?;
                let (mut driver, send) = within(self.timeout, async {
                    h3::client::new(crate::h3_zero_copy::Connection::new(conn))
                        .await
                        .map_err(|e| e.to_string())
                })
                .await?;
                tokio::spawn(async move {
                    let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
                });
                Ok(Sender::H3(send))
            }
            _ => {
                let tcp = within(self.timeout, async {
                    tokio::net::TcpStream::connect(self.addr)
                        .await
                        .map_err(|e| e.to_string())
                })
                .await?;
                let _ = tcp.set_nodelay(true);
                let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
                let tls = within(self.timeout, async {
                    connector
                        .connect(name, tcp)
                        .await
                        .map_err(|e| e.to_string())
                })
                .await?;
                let (send, conn) = within(self.timeout, async {
                    hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                        .timer(TokioTimer::new())
                        .initial_stream_window_size(RELAY_STREAM_WINDOW)
                        .initial_connection_window_size(RELAY_CONN_WINDOW)
                        .handshake(TokioIo::new(tls))
                        .await
                        .map_err(|e| e.to_string())
                })
                .await?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(Sender::H2(send))
            }
        }
    }

    /// Sends `req`'s method and path upstream on `conn` and returns the response head and a
    /// body that streams the origin's.
    pub async fn fetch(
        &self,
        conn: &UpstreamConn,
        req: &http::request::Parts,
    ) -> Result<(Response<()>, RelayBody), RelayError> {
        add(&self.stats.requests, 1);
        let sender = conn
            .sender
            .get_or_try_init(|| async {
                add(&self.stats.connects, 1);
                let r = self.open().await;
                if r.is_err() {
                    add(&self.stats.connect_failures, 1);
                }
                r
            })
            .await
            .map_err(|message| RelayError::Connect {
                addr: self.addr,
                message,
            })?
            .clone();
        let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri = format!("https://{}{path}", self.server_name);
        let up = Request::builder()
            .method(req.method.clone())
            .uri(&uri)
            .body(())
            .map_err(|e| RelayError::Request(e.to_string()))?;
        add(
            &self.stats.bytes_up,
            (uri.len() + req.method.as_str().len()) as u64,
        );
        let limit = self.timeout;
        let answer = async {
            match sender {
                Sender::H2(mut s) => {
                    let (parts, ()) = up.into_parts();
                    let resp = s
                        .send_request(Request::from_parts(parts, Empty::new()))
                        .await
                        .map_err(|e| RelayError::Request(e.to_string()))?;
                    let (head, body) = resp.into_parts();
                    Ok((Response::from_parts(head, ()), RelayBody::H2(body)))
                }
                Sender::H3(mut s) => {
                    let mut stream: H3Stream = s
                        .send_request(up)
                        .await
                        .map_err(|e| RelayError::Request(e.to_string()))?;
                    stream
                        .finish()
                        .await
                        .map_err(|e| RelayError::Request(e.to_string()))?;
                    let head = stream
                        .recv_response()
                        .await
                        .map_err(|e| RelayError::Request(e.to_string()))?;
                    Ok((head, RelayBody::H3(Box::new(stream))))
                }
            }
        };
        let (mut head, body) = tokio::time::timeout(limit, answer)
            .await
            .map_err(|_| RelayError::Timeout(limit))??;
        // The version the response came with, whatever the library left in the head.
        *head.version_mut() = match self.proto {
            Protocol::H3 => http::Version::HTTP_3,
            Protocol::H2 => http::Version::HTTP_2,
            Protocol::H1 => http::Version::HTTP_11,
        };
        Ok((relayed_head(head), body.counted(self.stats.clone())))
    }
}

/// The origin's status and the headers a client needs; hop-by-hop ones are not forwarded.
fn relayed_head(from: Response<()>) -> Response<()> {
    let mut resp = Response::new(());
    *resp.status_mut() = from.status();
    let h = resp.headers_mut();
    for name in [
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::CACHE_CONTROL,
        header::DATE,
    ] {
        if let Some(v) = from.headers().get(&name) {
            h.insert(name, v.clone());
        }
    }
    // RFC 9110 6.6.1: a response forwarded without a Date gets one.
    if !h.contains_key(header::DATE) {
        h.insert(header::DATE, crate::routes::date());
    }
    // RFC 9110 7.6.3: the protocol the response was received with, then who relayed it.
    let via = match from.version() {
        http::Version::HTTP_3 => "3 qbench-proxy",
        http::Version::HTTP_2 => "2 qbench-proxy",
        http::Version::HTTP_10 => "1.0 qbench-proxy",
        _ => "1.1 qbench-proxy",
    };
    h.insert(header::VIA, HeaderValue::from_static(via));
    resp
}

/// A short answer of the proxy's own when the origin cannot be reached.
pub fn failure(e: &RelayError) -> (Response<()>, Bytes) {
    let text = Bytes::from(format!("qbench proxy: {e}\n"));
    let mut resp = Response::new(());
    *resp.status_mut() = e.status();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    h.insert(header::DATE, crate::routes::date());
    (resp, text)
}

/// The origin's response body, read as the client takes it: flow control holds the origin
/// back when the client is slower.
pub enum RelayBody {
    H2(hyper::body::Incoming),
    H3(Box<H3Stream>),
    Counted(Box<Self>, Arc<RelayStats>),
}

impl RelayBody {
    fn counted(self, stats: Arc<RelayStats>) -> Self {
        Self::Counted(Box::new(self), stats)
    }

    /// The next chunk; `None` at the end, an error when the upstream stream broke.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<std::io::Result<Bytes>>> {
        let broken = |e: String| std::io::Error::other(format!("upstream: {e}"));
        match self {
            Self::H2(b) => loop {
                match Pin::new(&mut *b).poll_frame(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Ready(Some(Err(e))) => {
                        return Poll::Ready(Some(Err(broken(e.to_string()))))
                    }
                    Poll::Ready(Some(Ok(f))) => {
                        // Trailers are not relayed: qbench's origin sends none.
                        if let Ok(d) = f.into_data() {
                            return Poll::Ready(Some(Ok(d)));
                        }
                    }
                }
            },
            Self::H3(s) => match s.poll_recv_data(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(None)) => Poll::Ready(None),
                Poll::Ready(Ok(Some(mut d))) => {
                    Poll::Ready(Some(Ok(d.copy_to_bytes(d.remaining()))))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Some(Err(broken(e.to_string())))),
            },
            Self::Counted(inner, stats) => {
                let r = inner.poll_chunk(cx);
                match &r {
                    Poll::Ready(Some(Ok(d))) => add(&stats.bytes_down, d.len() as u64),
                    Poll::Ready(Some(Err(_))) => add(&stats.broken, 1),
                    _ => {}
                }
                r
            }
        }
    }

    pub async fn next_chunk(&mut self) -> Option<std::io::Result<Bytes>> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }
}

/// The upstream a request goes to, if it is relayed: everything but the proxy's own
/// telemetry (its sender toward the client), and what it refuses itself (bad methods, bodies
/// over the bound).
pub fn target<'a>(
    shared: &'a crate::shared::Shared,
    req: &http::request::Parts,
    drained: crate::request::Drained,
) -> Option<&'a Upstream> {
    let up = shared.upstream.as_ref()?;
    let relayable = drained == crate::request::Drained::Complete
        && matches!(req.method, http::Method::GET | http::Method::HEAD)
        && req.uri.path() != qbench_core::wire::TELEMETRY_PATH;
    relayable.then_some(up)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origins_status_and_body_headers_pass_hop_by_hop_ones_do_not() {
        let origin = Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "text/plain")
            .header(header::CONTENT_LENGTH, "10")
            .header(header::CONNECTION, "close")
            .header("alt-svc", "h3=\":443\"")
            .version(http::Version::HTTP_2)
            .body(())
            .unwrap();
        let r = relayed_head(origin);
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(r.headers()[header::CONTENT_LENGTH], "10");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "text/plain");
        assert_eq!(r.headers()[header::VIA], "2 qbench-proxy");
        assert!(r.headers().get(header::CONNECTION).is_none());
        assert!(r.headers().get("alt-svc").is_none());
    }

    #[test]
    fn failures_say_why_with_a_gateway_status() {
        let (head, text) = failure(&RelayError::Timeout(Duration::from_secs(10)));
        assert_eq!(head.status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            head.headers()[header::CONTENT_LENGTH],
            text.len().to_string()
        );
        let refused = RelayError::Connect {
            addr: "198.18.2.2:4433".parse().unwrap(),
            message: "connection refused".into(),
        };
        let (head, text) = failure(&refused);
        assert_eq!(head.status(), StatusCode::BAD_GATEWAY);
        assert!(String::from_utf8_lossy(&text).contains("198.18.2.2:4433"));
    }
}
