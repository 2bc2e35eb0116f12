//! HTTP/1.1 over TLS 1.3 over TCP (hyper): one request at a time per connection, no pipelining,
//! like a browser; use `--connections` for parallelism.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::Uri;
use http_body_util::Empty;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use qbench_core::ErrorKind;
use tokio::sync::Mutex;

use super::activity::Activity;
use super::streams::{Opened, StreamFacts};
use super::tcp::TlsTcp;
use super::{hyper_exchange, step, BoxFuture, Connected, Exchange, FetchError, Sink, Transport};
use crate::measure::clock::Clock;

pub(crate) struct H1 {
    pub tcp: TlsTcp,
    pub clock: Clock,
}

struct H1Conn {
    send: Mutex<http1::SendRequest<Empty<Bytes>>>,
    timeout: std::time::Duration,
    activity: Activity,
    on_wire: Opened,
}

impl Transport for H1 {
    fn connect(&self) -> BoxFuture<'_, Result<Connected, FetchError>> {
        Box::pin(self.connect_inner())
    }
}

impl H1 {
    async fn connect_inner(&self) -> Result<Connected, FetchError> {
        let (tls, activity, info) = self.tcp.connect().await?;
        let done = self.clock.now();
        let timeout = self.tcp.endpoint.timeout;
        let (send, conn) = step(
            "HTTP/1.1 handshake",
            timeout,
            http1::Builder::new().handshake(TokioIo::new(tls)),
        )
        .await?;
        tokio::spawn(conn);
        Ok(Connected {
            conn: Arc::new(H1Conn {
                send: Mutex::new(send),
                timeout,
                activity,
                on_wire: Opened::default(),
            }),
            info,
            done,
            zero_rtt: None,
        })
    }
}

impl Exchange for H1Conn {
    /// Each step has a timer of its own (hyper's futures are timed step by step).
    async fn request(
        &self,
        uri: &Uri,
        p: &mut dyn Sink,
        _: super::Dog<'_>,
    ) -> Result<(), FetchError> {
        // The lock is the HTTP/1.1 rule: the next request waits for this response to end.
        let mut send = self.send.lock().await;
        // Closed before this request went out (the server's `Connection: close` on the
        // previous response, or an idle close): the server never saw it.
        step("HTTP/1.1 connection ready", self.timeout, send.ready())
            .await
            .map_err(FetchError::unsent)?;
        let _place = self.on_wire.opened();
        let host = uri
            .authority()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
        let path = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let request = http::Request::get(path)
            .header(http::header::HOST, host)
            .body(Empty::<Bytes>::new())
            .map_err(|e| FetchError::from_err("building request", &e))?;
        // hyper hands back a request it did not write when the connection closed first.
        let unsent = AtomicBool::new(false);
        let sent = async {
            send.try_send_request(request).await.map_err(|e| {
                unsent.store(e.message().is_some(), Ordering::Relaxed);
                e.into_error()
            })
        };
        hyper_exchange(sent, self.timeout, &self.activity, p, |e| {
            match e.kind {
                // HTTP/1.1 has no stream reset: a connection closed mid-body is a short body.
                ErrorKind::Reset => FetchError::new(ErrorKind::ShortBody, e.message),
                _ => e,
            }
        })
        .await
        .map_err(|e| match unsent.load(Ordering::Relaxed) {
            true => e.unsent(),
            false => e,
        })
    }

    fn streams(&self) -> StreamFacts {
        StreamFacts {
            peer_limit: None,
            peak: self.on_wire.take_peak(),
            quic: None,
        }
    }
}
