//! HTTP/2 over TLS 1.3 over TCP, on the h2 crate that hyper is built on: its request handle
//! says how many streams the server allows, which hyper's does not.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use qbench_core::wire::{CONN_WINDOW, MAX_H2_FRAME, MAX_RESPONSE_HEADER_BYTES, STREAM_WINDOW};
use qbench_core::ErrorKind;

use super::activity::{Activity, Moved, Name, Phase, WhileMoving};
use super::streams::{OnWire, StreamFacts};
use super::tcp::TlsTcp;
use super::turns::Turns;
use super::{step, BoxFuture, Connected, Exchange, FetchError, Sink, Transport};
use crate::measure::clock::Clock;

/// Streams assumed until the server's SETTINGS arrive: hyper's choice, and RFC 9113
/// 6.5.2's recommended minimum for servers.
const INITIAL_MAX_SEND_STREAMS: usize = 100;

pub(crate) struct H2 {
    pub tcp: TlsTcp,
    pub clock: Clock,
    /// Bytes a connection reads before it hands the request tasks a turn
    /// ([`super::turns::turn_bytes`]).
    pub turn_bytes: usize,
}

/// The step from which a request has been handed to h2.
const SENDING: usize = 2;

/// A request's steps, as its errors name them.
const STEPS: [&str; 5] = [
    "waiting for an HTTP/2 stream",
    "HTTP/2 connection ready",
    "sending request",
    "waiting for response headers",
    "reading response body",
];

struct H2Conn {
    send: h2::client::SendRequest<Bytes>,
    timeout: Duration,
    activity: Activity,
    on_wire: OnWire,
    /// The server's limit as of the last response, 0 before the first. A response means the
    /// server's first SETTINGS have been applied: that frame precedes every other it sends.
    server_limit: AtomicUsize,
    /// The task that drives the connection, ended when the connection fell silent.
    driver: tokio::task::AbortHandle,
    /// A request timed out with nothing moving on the connection for `timeout`: it was ended,
    /// as QUIC's idle timeout (the same `--timeout`) ends an HTTP/3 connection.
    silent: AtomicBool,
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
            h2::client::Builder::new()
                .initial_window_size(rwnd.unwrap_or(STREAM_WINDOW))
                .initial_connection_window_size(rwnd.unwrap_or(CONN_WINDOW))
                .max_frame_size(MAX_H2_FRAME)
                .max_header_list_size(u32::try_from(MAX_RESPONSE_HEADER_BYTES).unwrap_or(u32::MAX))
                .max_concurrent_reset_streams(1024)
                .initial_max_send_streams(INITIAL_MAX_SEND_STREAMS)
                .enable_push(false)
                .handshake::<_, Bytes>(Turns::new(tls, self.turn_bytes)),
        )
        .await?;
        // Ends when the last handle is dropped (GOAWAY) or the connection fails; a failure
        // reaches every request on it.
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        })
        .abort_handle();
        Ok(Connected {
            conn: Arc::new(H2Conn {
                send,
                timeout,
                activity,
                on_wire: OnWire::default(),
                server_limit: AtomicUsize::new(0),
                driver,
                silent: AtomicBool::new(false),
            }),
            info,
            done,
            zero_rtt: None,
        })
    }
}

impl H2Conn {
    /// After a response head: the server's limit may have changed.
    fn heard_from_server(&self) {
        let limit = self.send.current_max_send_streams();
        if self.server_limit.swap(limit, Ordering::Relaxed) != limit {
            self.on_wire.recheck(limit);
        }
    }
}

impl H2Conn {
    /// A request's error, where the connection may have fallen silent. Nothing moved on it
    /// for `timeout` while this request waited: TCP would keep it for many minutes, so it is
    /// ended here, and the requests after go on a new connection as they do on h1 and h3.
    /// The requests it had sent are failed with it, as timeouts: a response can no longer
    /// come, and that is why. One still waiting for a stream (`unsent`) was never handed to
    /// h2, so it goes on the new connection too, whichever request's timer fired first.
    fn fell_silent(&self, e: FetchError, unsent: bool) -> FetchError {
        if e.cut {
            return e;
        }
        if e.kind == ErrorKind::Timeout {
            if !self.silent.swap(true, Ordering::AcqRel) {
                self.driver.abort();
            }
            return if unsent {
                self.ended(&e.message).unsent()
            } else {
                e
            };
        }
        if e.unprocessed || !self.silent.load(Ordering::Acquire) {
            return e;
        }
        self.ended(&e.message)
    }

    fn ended(&self, what: &str) -> FetchError {
        FetchError::new(
            ErrorKind::Timeout,
            format!(
                "{what} (the connection was ended: nothing moved on it for {})",
                humantime::format_duration(self.timeout)
            ),
        )
    }
}

impl Exchange for H2Conn {
    async fn request(
        &self,
        uri: &Uri,
        p: &mut dyn Sink,
        dog: super::Dog<'_>,
    ) -> Result<(), FetchError> {
        // Every step times out only when nothing moves on the connection: a request waiting
        // for a stream belongs to the connection, which may be busy with others.
        let phase = Phase::new(&STEPS);
        let start = p.stamped().unwrap_or_else(tokio::time::Instant::now);
        let failed = |e: &(dyn std::error::Error + 'static)| FetchError::from_err(phase.name(), e);
        let steps = async {
            // A request is handed to h2 only when the server allows another stream, so h2
            // opens it at once and the object's timer starts when its stream does.
            let until = p.unsent_until();
            let _place = self
                .on_wire
                .enter(|| self.send.current_max_send_streams(), until)
                .await?;
            phase.set(1);
            // Not ready: the connection ended (a reset, an end of stream without a GOAWAY, or
            // silence: see `fell_silent`) before this request was handed to h2. It goes on a
            // new one.
            let ready = self.send.clone().ready().await;
            let mut send = ready.map_err(|e| failed(&e).unsent())?;
            // Ended for its silence, its driver maybe not yet dropped: nothing more goes on it.
            if self.silent.load(Ordering::Acquire) {
                return Err(self.ended(phase.name()).unsent());
            }
            p.sending();
            phase.set(SENDING);
            // Built after the waits, so that it is not part of what a waiting request holds.
            let request = super::get(uri);
            let (resp, _) = send.send_request(request, true).map_err(|e| failed(&e))?;
            p.stream(u64::from(resp.stream_id().as_u32()));
            phase.set(3);
            let resp = resp.await.map_err(|e| failed(&e))?;
            self.heard_from_server();
            p.headers(resp.status(), resp.headers())?;
            phase.set(4);
            let mut body = resp.into_body();
            while let Some(chunk) = body.data().await {
                let chunk = chunk.map_err(|e| failed(&e))?;
                // The window opens as the bytes are read, as hyper does.
                let _ = body.flow_control().release_capacity(chunk.len());
                p.data(&chunk)?;
            }
            Ok(())
        };
        let moved = Moved::Bytes {
            activity: &self.activity,
            start,
        };
        let out = WhileMoving::new(steps, moved, self.timeout, Name::Phase(&phase))
            .lent(dog)
            .await;
        out.map_err(|e| self.fell_silent(e, phase.at() < SENDING))
    }

    fn streams(&self) -> StreamFacts {
        let limit = self.server_limit.load(Ordering::Relaxed);
        StreamFacts {
            // h2 reads an absent SETTINGS_MAX_CONCURRENT_STREAMS as no limit (usize::MAX).
            peer_limit: (limit != 0 && limit != usize::MAX).then_some(limit as u64),
            peak: self.on_wire.take_peak(),
            quic: None,
        }
    }
}
