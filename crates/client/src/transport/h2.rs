//! HTTP/2 over TLS 1.3 over TCP (hyper).

use bytes::Bytes;
use http::Uri;
use http_body_util::Empty;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use qbench_core::wire::{CONN_WINDOW, MAX_H2_FRAME, STREAM_WINDOW};

use super::activity::Activity;
use super::tcp::TlsTcp;
use std::sync::Arc;

use super::{hyper_exchange, step, BoxFuture, Connected, Exchange, FetchError, Sink, Transport};
use crate::clock::Clock;

pub(crate) struct H2 {
    pub(crate) tcp: TlsTcp,
    pub(crate) clock: Clock,
}

struct H2Conn {
    send: http2::SendRequest<Empty<Bytes>>,
    timeout: std::time::Duration,
    activity: Activity,
}

impl Transport for H2 {
    fn connect(&self) -> BoxFuture<'_, Result<Connected, FetchError>> {
        Box::pin(self.connect_inner())
    }
}

impl H2 {
    async fn connect_inner(&self) -> Result<Connected, FetchError> {
        let (tls, activity, info) = self.tcp.connect().await?;
        let done = self.clock.now();
        let timeout = self.tcp.endpoint.timeout;
        let rwnd = self.tcp.endpoint.rwnd;
        let (send, conn) = step(
            "HTTP/2 handshake",
            timeout,
            http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(rwnd.unwrap_or(STREAM_WINDOW))
                .initial_connection_window_size(rwnd.unwrap_or(CONN_WINDOW))
                .max_frame_size(MAX_H2_FRAME)
                .max_concurrent_reset_streams(1024)
                .handshake(TokioIo::new(tls)),
        )
        .await?;
        tokio::spawn(conn);
        Ok(Connected {
            conn: Arc::new(H2Conn {
                send,
                timeout,
                activity,
            }),
            info,
            done,
            zero_rtt: None,
        })
    }
}

impl Exchange for H2Conn {
    async fn request(&self, uri: &Uri, p: &mut dyn Sink) -> Result<(), FetchError> {
        let mut send = self.send.clone();
        step("HTTP/2 connection ready", self.timeout, send.ready()).await?;
        let request = http::Request::get(uri.clone())
            .body(Empty::<Bytes>::new())
            .map_err(|e| FetchError::from_err("building request", &e))?;
        hyper_exchange(
            send.send_request(request),
            self.timeout,
            &self.activity,
            p,
            |e| e,
        )
        .await
    }
}
