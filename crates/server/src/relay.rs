//! The split-connection proxy's upstream side (`qbench proxy`, IMC'17 Section 5.5): each
//! connection a client opens to the proxy gets its own upstream connection to the origin,
//! over HTTP/2 (TCP + TLS) or HTTP/3 (QUIC), opened at its first request. Bodies stream
//! through as they arrive; nothing holds a whole object.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use qbench_core::Protocol;

pub use crate::relay_body::RelayBody;
use crate::relay_stats::add;
pub use crate::relay_stats::RelayStats;
pub use crate::upstream::Upstream;

/// How far the origin may run ahead of a slower client, per stream and per upstream HTTP/2
/// connection: what the proxy buffers at most for one client connection.
pub const RELAY_STREAM_WINDOW: u32 = 2 * 1024 * 1024;
pub const RELAY_CONN_WINDOW: u32 = 8 * 1024 * 1024;

/// What a proxy holds toward one client connection, ahead of the client's reading: hyper's
/// send buffer is per HTTP/2 stream, so each of `streams` gets its share (at least 16 KiB);
/// over HTTP/3 it is the connection's send window.
pub fn client_side_buffer(streams: u32) -> usize {
    (RELAY_CONN_WINDOW as usize / streams.max(1) as usize).max(16 * 1024)
}

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("connecting upstream to {addr}: {message}")]
    Connect { addr: SocketAddr, message: String },
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    #[error("upstream request failed: {0}")]
    Request(String),
    #[error("the request has been through this proxy already (its Via names it): a proxy loop")]
    Loop,
}

impl RelayError {
    fn status(&self) -> StatusCode {
        match self {
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Connect { .. } | Self::Request(_) => StatusCode::BAD_GATEWAY,
            Self::Loop => StatusCode::LOOP_DETECTED,
        }
    }
}

type H3Send = h3::client::SendRequest<qbench_stack::h3_zero_copy::OpenStreams, Bytes>;
use crate::relay_body::H3Stream;

#[derive(Clone)]
enum Sender {
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
    H3(H3Send, quinn::Connection),
}

impl Sender {
    /// The connection has ended (the origin restarted, closed it, or it timed out).
    fn is_closed(&self) -> bool {
        match self {
            Self::H2(s) => s.is_closed(),
            Self::H3(_, c) => c.close_reason().is_some(),
        }
    }

    /// Sends `up` on this connection: the response's head, and its body as it streams.
    async fn send(self, up: Request<()>) -> Result<(Response<()>, RelayBody), RelayError> {
        match self {
            Self::H2(mut s) => {
                let (parts, ()) = up.into_parts();
                let resp = s
                    .send_request(Request::from_parts(parts, Empty::new()))
                    .await
                    .map_err(request_failed)?;
                let (head, body) = resp.into_parts();
                Ok((Response::from_parts(head, ()), RelayBody::H2(body)))
            }
            Self::H3(mut s, _) => {
                let mut stream: H3Stream = s.send_request(up).await.map_err(request_failed)?;
                stream.finish().await.map_err(request_failed)?;
                let head = stream.recv_response().await.map_err(request_failed)?;
                Ok((head, RelayBody::H3(Box::new(stream))))
            }
        }
    }
}

/// One client connection's upstream connection, opened at its first request, opened again
/// at the next request once it has closed, and closed with the client's connection (its last
/// handle dropped).
#[derive(Default)]
pub struct UpstreamConn {
    sender: tokio::sync::Mutex<Option<Sender>>,
}

/// This process's name in the `Via` of the requests it relays: a request that comes back
/// carrying it has gone round a loop of proxies (or a proxy relaying to itself).
pub fn via_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        // RandomState's keys are random per process: no RNG crate needed for a name.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        format!("qbench-proxy-{:016x}", h.finish())
    })
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
                let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
                // quinn's default connection window is unlimited: the origin could run ahead
                // of a stalled client by 1.25 MB per stream (320 MB at 256 streams).
                let mut t = quinn::TransportConfig::default();
                t.stream_receive_window(quinn::VarInt::from_u32(RELAY_STREAM_WINDOW));
                t.receive_window(quinn::VarInt::from_u32(RELAY_CONN_WINDOW));
                cfg.transport_config(Arc::new(t));
                let conn = ep
                    .connect_with(cfg, self.addr, &self.server_name)
                    .map_err(|e| e.to_string())?;
                let conn = within(self.timeout, async {
                    conn.await.map_err(|e| e.to_string())
                })
                .await?;
                let quic = conn.clone();
                let (mut driver, send) = within(self.timeout, async {
                    // The origin's response heads, bounded as qbench's client bounds them.
                    let max = qbench_core::wire::MAX_RESPONSE_HEADER_BYTES;
                    qbench_stack::h3_zero_copy::client_builder(max)
                        .build::<_, _, Bytes>(qbench_stack::h3_zero_copy::Connection::new(conn))
                        .await
                        .map_err(|e| e.to_string())
                })
                .await?;
                tokio::spawn(async move {
                    let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
                });
                Ok(Sender::H3(send, quic))
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

    /// The connection to send on: the open one, or a new one if there is none yet or the
    /// last one has closed.
    async fn sender(&self, conn: &UpstreamConn) -> Result<Sender, RelayError> {
        let mut slot = conn.sender.lock().await;
        match slot.as_ref() {
            Some(s) if !s.is_closed() => return Ok(s.clone()),
            Some(_) => add(&self.stats.reopened, 1),
            None => {}
        }
        *slot = None;
        add(&self.stats.connects, 1);
        let s = self.open().await.map_err(|message| {
            add(&self.stats.connect_failures, 1);
            RelayError::Connect {
                addr: self.addr,
                message,
            }
        })?;
        *slot = Some(s.clone());
        Ok(s)
    }

    /// Sends `req`'s method and path upstream on `conn` and returns the response head and a
    /// body that streams the origin's. A request that failed because the connection had
    /// ended (the origin restarted) is sent once more on a new one: relayed requests are GET
    /// and HEAD, which may be repeated.
    pub async fn fetch(
        &self,
        conn: &UpstreamConn,
        req: &http::request::Parts,
    ) -> Result<(Response<()>, RelayBody), RelayError> {
        add(&self.stats.requests, 1);
        let r = self.fetch_once(conn, req).await;
        let r = match r {
            Err(RelayError::Request(_)) if conn.closed().await => self.fetch_once(conn, req).await,
            r => r,
        };
        if r.is_err() {
            add(&self.stats.failed, 1);
        }
        r
    }

    async fn fetch_once(
        &self,
        conn: &UpstreamConn,
        req: &http::request::Parts,
    ) -> Result<(Response<()>, RelayBody), RelayError> {
        let token = via_token();
        if came_through(req, token) {
            return Err(RelayError::Loop);
        }
        let sender = self.sender(conn).await?;
        let (up, head_bytes) = self.upstream_request(req, token)?;
        add(&self.stats.bytes_up, head_bytes);
        let limit = self.timeout;
        let (mut head, body) = tokio::time::timeout(limit, sender.send(up))
            .await
            .map_err(|_| RelayError::Timeout(limit))??;
        // The version the response came with, whatever the library left in the head.
        *head.version_mut() = match self.proto {
            Protocol::H3 => http::Version::HTTP_3,
            Protocol::H2 => http::Version::HTTP_2,
            Protocol::H1 => http::Version::HTTP_11,
        };
        let expected = head
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .filter(|_| req.method != http::Method::HEAD)
            .filter(|_| !matches!(head.status().as_u16(), 204 | 304));
        let body = body.checked(expected).counted(self.stats.clone());
        Ok((relayed_head(head), body))
    }

    /// `req`'s method and path as a request to the origin, with a Via that adds this proxy,
    /// and the size of its head as sent: method, scheme, authority, path and Via.
    fn upstream_request(
        &self,
        req: &http::request::Parts,
        token: &str,
    ) -> Result<(Request<()>, u64), RelayError> {
        let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
        // The authority names the port unless it is HTTPS's own.
        let authority = match self.addr.port() {
            443 => self.server_name.clone(),
            port => format!("{}:{port}", self.server_name),
        };
        let uri = format!("https://{authority}{path}");
        let version = match req.version {
            http::Version::HTTP_3 => "3",
            http::Version::HTTP_2 => "2",
            http::Version::HTTP_10 => "1.0",
            _ => "1.1",
        };
        // What the request came through already, then this proxy (RFC 9110 7.6.3): a loop of
        // proxies shows as a Via that names one of them twice.
        let mut via: Vec<&str> = req
            .headers
            .get_all(header::VIA)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let ours = format!("{version} {token}");
        via.push(&ours);
        let via = via.join(", ");
        let up = Request::builder()
            .method(req.method.clone())
            .uri(&uri)
            .header(header::VIA, &via)
            .body(())
            .map_err(request_failed)?;
        let head_bytes =
            req.method.as_str().len() + "https".len() + authority.len() + path.len() + via.len();
        Ok((up, head_bytes as u64))
    }
}

/// Whether `req` has been through this proxy already: its Via names `token`.
fn came_through(req: &http::request::Parts, token: &str) -> bool {
    req.headers
        .get_all(header::VIA)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(token)))
}

/// A request the origin's connection failed, as the relay's error.
fn request_failed(e: impl std::fmt::Display) -> RelayError {
    RelayError::Request(e.to_string())
}

impl UpstreamConn {
    /// Whether the connection requests went out on has ended.
    async fn closed(&self) -> bool {
        self.sender
            .lock()
            .await
            .as_ref()
            .is_some_and(Sender::is_closed)
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
