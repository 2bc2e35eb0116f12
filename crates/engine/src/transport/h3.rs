//! HTTP/3 over QUIC (quinn + h3), all requests of a connection multiplexed as streams.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::Uri;
use qbench_core::spec::quic_knobs::QuicStats;
use qbench_core::wire::{MAX_RESPONSE_HEADER_BYTES, STREAM_WINDOW, UDP_BUFFER};
use qbench_core::{ErrorKind, HandshakeInfo};
use qbench_stack::qlog::QlogDir;
use socket2::{Domain, Protocol, Socket, Type};

use super::activity::{Moved, Name, Phase, WhileMoving};
use super::peer_params::{PeerStreams, Recording};
use super::streams::{open_unless_ended, Opened, StreamFacts};
use super::{step, BoxFuture, Connected, Endpoint, Exchange, FetchError, Sink, Transport, ZeroRtt};
use crate::measure::clock::Clock;
use crate::transport::tls::TicketStore;

/// Each connection of a run gets a QUIC endpoint (a UDP socket and its driver) of its own, as
/// each h2 connection has its own TCP socket: connections on different client threads then
/// share no endpoint lock, socket or driver task, and scale as independent processes do. With
/// pinned client threads, an endpoint is made on the thread whose connections use it. The
/// endpoints are made before the run, so that no handshake time includes making one (in a
/// fresh VM that waited seconds for the kernel's random numbers), and a later run's
/// connections take them in turn. Past `MAX_ENDPOINTS` connections share them: an endpoint
/// costs a socket, a driver task and a receive buffer, which at ten thousand connections
/// doubled the client's memory and ran out of descriptors, for connections far more than cores.
pub(crate) struct H3 {
    crypto: Arc<quinn::crypto::rustls::QuicClientConfig>,
    transport: Arc<quinn::TransportConfig>,
    target: Endpoint,
    clock: Clock,
    zero_rtt: bool,
    tickets: Option<Arc<TicketStore>>,
    /// The endpoints, each with a second handle to its socket (where the report reads
    /// UDP_GRO), and the next one to use.
    endpoints: Vec<(quinn::Endpoint, Arc<std::net::UdpSocket>)>,
    /// With pinned client threads, endpoint `i` was made on pinned runtime `i % lanes`, and
    /// each runtime's connections take its own endpoints in turn (`next[k]`); otherwise one
    /// lane.
    lanes: usize,
    next: Vec<std::sync::atomic::AtomicUsize>,
    /// `--qlog`: where the connections that are sampled write a qlog.
    qlog: Option<Arc<QlogDir>>,
}

/// Most QUIC endpoints one transport opens (as many as a server's sockets at most).
pub(crate) const MAX_ENDPOINTS: usize = qbench_stack::reuseport::MAX_SOCKETS;

type Sender = h3::client::SendRequest<qbench_stack::h3_zero_copy::OpenStreams, Bytes>;

struct H3Conn {
    conn: quinn::Connection,
    send: Sender,
    /// Request handles put back after use: cloning one takes quinn's connection lock (and
    /// dropping it again), where a handle from here takes an uncontended lock of ours.
    spare: std::sync::Mutex<Vec<Sender>>,
    timeout: Duration,
    peer: Arc<PeerStreams>,
    on_wire: Opened,
    /// quinn's counters at the last report, so that each run gets its own.
    reported: std::sync::Mutex<QuicStats>,
    /// The connection's endpoint's socket (a second handle), where the report reads UDP_GRO.
    sock: Arc<std::net::UdpSocket>,
}

fn alpn_of(conn: &quinn::Connection) -> Option<String> {
    conn.handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol)
        .map(|p| String::from_utf8_lossy(&p).into_owned())
}

fn transport(e: &Endpoint) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u32(e.rwnd.unwrap_or(STREAM_WINDOW)));
    if let Some(r) = e.rwnd {
        t.receive_window(quinn::VarInt::from_u32(r));
    }
    t.max_idle_timeout(e.timeout.try_into().ok());
    if let Some(n) = e.reorder_threshold {
        t.packet_threshold(n);
    }
    if let Some(r) = e.reorder_time_threshold {
        t.time_threshold(r as f32);
    }
    qbench_stack::quic_knobs::apply(&mut t, &e.quic);
    t
}

fn udp_socket(peer: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let local: SocketAddr = match peer {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    let _ = s.set_recv_buffer_size(UDP_BUFFER);
    let _ = s.set_send_buffer_size(UDP_BUFFER);
    s.bind(&local.into())?;
    Ok(s.into())
}

/// An endpoint on a socket of its own, and a second handle to the socket.
fn new_endpoint(
    target: &Endpoint,
) -> Result<(quinn::Endpoint, Arc<std::net::UdpSocket>), FetchError> {
    let sock =
        udp_socket(target.addr).map_err(|e| FetchError::from_err("binding a UDP socket", &e))?;
    if let Some(b) = target.quic.rcvbuf {
        qbench_stack::sockopt::force_receive_buffer(&sock, b.0)
            .map_err(|e| FetchError::from_err("setting the UDP receive buffer", &e))?;
    }
    if let Some(b) = target.quic.sndbuf {
        qbench_stack::sockopt::force_send_buffer(&sock, b.0)
            .map_err(|e| FetchError::from_err("setting the UDP send buffer", &e))?;
    }
    // The endpoint owns the socket; `gro=off` is set after quinn has turned GRO on.
    let fd = sock
        .try_clone()
        .map_err(|e| FetchError::from_err("binding a UDP socket", &e))?;
    let endpoint = quinn::Endpoint::new(
        qbench_stack::quic_knobs::endpoint_config(&target.quic),
        None,
        sock,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(|e| FetchError::from_err("creating the QUIC endpoint", &e))?;
    if let Some(on) = target.quic.gro {
        qbench_stack::quic_knobs::set_gro(&fd, on)
            .map_err(|e| FetchError::from_err("setting UDP_GRO", &e))?;
    }
    Ok((endpoint, Arc::new(fd)))
}

fn route_to(peer: SocketAddr) -> std::io::Result<()> {
    let local: SocketAddr = match peer {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    std::net::UdpSocket::bind(local)?.connect(peer)
}

impl H3 {
    /// With an endpoint for each of `connections` (at most `MAX_ENDPOINTS`). Needs a tokio
    /// runtime context. With `pinned`, endpoint `i` is made on `pinned.handle(i)`, where its
    /// socket is polled and its driver runs, beside the connections made there.
    pub(crate) fn new(
        target: Endpoint,
        tls: rustls::ClientConfig,
        tickets: Option<Arc<TicketStore>>,
        zero_rtt: bool,
        clock: Clock,
        connections: usize,
        pinned: Option<&crate::transport::pinned::Pinned>,
    ) -> Result<Self, FetchError> {
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
            .map_err(|e| FetchError::new(ErrorKind::Tls, format!("QUIC TLS config: {e}")))?;
        let endpoints = (0..connections.clamp(1, MAX_ENDPOINTS))
            .map(|i| match pinned {
                Some(p) => {
                    let _on = p.handle(i).enter();
                    new_endpoint(&target)
                }
                None => new_endpoint(&target),
            })
            .collect::<Result<_, _>>()?;
        let lanes = pinned.map_or(1, |p| p.threads());
        Ok(Self {
            crypto: Arc::new(crypto),
            transport: Arc::new(transport(&target)),
            target,
            clock,
            zero_rtt,
            tickets,
            endpoints,
            lanes,
            next: (0..lanes).map(|_| Default::default()).collect(),
            qlog: None,
        })
    }

    /// `--qlog`: the connections that `dir` samples write a qlog there.
    pub(crate) fn qlog_to(mut self, dir: Option<Arc<QlogDir>>) -> Self {
        self.qlog = dir;
        self
    }

    /// The endpoint for a new connection: on a pinned thread, the next of those made on its
    /// runtime; elsewhere (or where that runtime has none), the next of all.
    fn endpoint(&self) -> (quinn::Endpoint, Arc<std::net::UdpSocket>) {
        let all = self.endpoints.len();
        let (lane, first, count) = match crate::transport::pinned::current_index() {
            Some(k) if k < self.lanes && k < all => (k, k, (all - k).div_ceil(self.lanes)),
            _ => (0, 0, all),
        };
        let step = if count == all { 1 } else { self.lanes };
        let j = self.next[lane].fetch_add(1, std::sync::atomic::Ordering::Relaxed) % count;
        self.endpoints[first + j * step].clone()
    }

    /// Returns the connection and, when 0-RTT was attempted, the acceptance future.
    async fn handshake(
        &self,
        endpoint: &quinn::Endpoint,
        peer: &Arc<PeerStreams>,
    ) -> Result<(quinn::Connection, Option<quinn::ZeroRttAccepted>), FetchError> {
        let t = &self.target;
        // quinn drops a datagram the kernel cannot route and waits for the idle timeout; a
        // connected UDP socket asks for the route without sending anything.
        route_to(t.addr)
            .map_err(|e| FetchError::from_err(&format!("QUIC connect to {}", t.addr), &e))?;
        let mut config = quinn::ClientConfig::new(Arc::new(Recording {
            inner: self.crypto.clone(),
            seen: peer.clone(),
        }));
        let qlogged = self
            .qlog
            .as_ref()
            .and_then(|q| q.next(None))
            .map(|(stream, _)| {
                let mut tc = transport(t);
                tc.qlog_stream(Some(stream));
                Arc::new(tc)
            });
        config.transport_config(qlogged.unwrap_or_else(|| self.transport.clone()));
        let connecting = endpoint
            .connect_with(config, t.addr, &t.server_name)
            .map_err(|e| {
                FetchError::new(
                    ErrorKind::Unreachable,
                    format!("QUIC connect to {}: {e}", t.addr),
                )
            })?;
        let what = format!("QUIC handshake with {} ({})", t.server_name, t.addr);
        if self.zero_rtt {
            match connecting.into_0rtt() {
                Ok((conn, accepted)) => return Ok((conn, Some(accepted))),
                Err(connecting) => return Ok((step(&what, t.timeout, connecting).await?, None)),
            }
        }
        Ok((step(&what, t.timeout, connecting).await?, None))
    }
}

impl Transport for H3 {
    fn connect(&self) -> BoxFuture<'_, Result<Connected, FetchError>> {
        Box::pin(self.connect_inner())
    }

    fn udp_buffers(&self) -> Option<(u64, u64)> {
        let (_, sock) = self.endpoints.first()?;
        qbench_stack::sockopt::buffers(&**sock).ok()
    }

    fn finish(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {
            let idle =
                futures_util::future::join_all(self.endpoints.iter().map(|(e, _)| e.wait_idle()));
            let _ = tokio::time::timeout(Duration::from_secs(1), idle).await;
        })
    }
}

impl H3 {
    async fn connect_inner(&self) -> Result<Connected, FetchError> {
        let taken_before = self.tickets.as_ref().map(|s| s.tickets_taken());
        let peer = Arc::new(PeerStreams::default());
        let (endpoint, sock) = self.endpoint();
        let local_port = sock.local_addr().ok().map(|a| a.port());
        let (conn, zero_rtt) = self.handshake(&endpoint, &peer).await?;
        let done = self.clock.now();
        let timeout = self.target.timeout;
        let (mut driver, send) = step(
            "HTTP/3 connection setup",
            timeout,
            qbench_stack::h3_zero_copy::client_builder(MAX_RESPONSE_HEADER_BYTES)
                .build::<_, _, Bytes>(qbench_stack::h3_zero_copy::Connection::new(conn.clone())),
        )
        .await?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let info = HandshakeInfo {
            alpn: alpn_of(&conn),
            resumption_offered: match (taken_before, &self.tickets) {
                (Some(b), Some(s)) => s.tickets_taken() > b,
                _ => false,
            },
            resumed: zero_rtt.is_some().then_some(true),
            early_data_accepted: false,
            local_port,
        };
        let zero_rtt = zero_rtt.map(|accepted| {
            let (conn, mut info) = (conn.clone(), info.clone());
            Box::pin(async move {
                info.early_data_accepted = accepted.await;
                info.alpn = alpn_of(&conn);
                info
            }) as ZeroRtt
        });
        Ok(Connected {
            conn: Arc::new(H3Conn {
                conn,
                send,
                spare: std::sync::Mutex::new(Vec::new()),
                timeout,
                peer,
                on_wire: Opened::default(),
                reported: Default::default(),
                sock,
            }),
            info,
            done,
            zero_rtt,
        })
    }
}

/// A request's steps once its stream is open, as its errors name them.
const STEPS: [&str; 3] = [
    "finishing request",
    "waiting for response headers",
    "reading response body",
];

impl H3Conn {
    fn spare_send(&self) -> Sender {
        let spare = self.spare.lock().expect("spare handles lock").pop();
        spare.unwrap_or_else(|| self.send.clone())
    }
}

impl Exchange for H3Conn {
    async fn request(
        &self,
        uri: &Uri,
        p: &mut dyn Sink,
        dog: super::Dog<'_>,
    ) -> Result<(), FetchError> {
        let mut send = self.spare_send();
        let request = super::get(uri);
        // h3 opens the stream and writes the headers in one call. The wait for stream credit
        // (the server's MAX_STREAMS) is the connection's, not the object's: no per-object
        // timeout applies to it, and the QUIC idle timeout (--timeout) ends a connection that
        // makes no progress at all. A request that finds its connection closed (that timeout,
        // or the server's) never reached the server whole: it goes on a new connection, as on
        // HTTP/1.1, instead of failing at once, and so every request after it.
        // Held above the server's stream limit, a request still waiting for credit when the
        // run stops starting requests is dropped unsent.
        let until = p.unsent_until();
        let sending = {
            let opening = std::pin::pin!(send.send_request(request));
            open_unless_ended(opening, until).await?
        };
        let mut stream = sending.map_err(|e| {
            let e = FetchError::from_err("sending request", &e);
            match self.conn.close_reason() {
                Some(_) => e.unsent(),
                None => e,
            }
        })?;
        self.spare.lock().expect("spare handles lock").push(send);
        // Timed from here: the stream is open and the request is on its way.
        p.sending();
        p.stream(stream.id().into_inner());
        let _place = self.on_wire.opened();
        // Each step times out on its own after `timeout` without moving, under one timer for
        // the whole request (a timer entry per step was a third of this path's timer cost).
        let phase = Phase::new(&STEPS);
        let sent = p.stamped().unwrap_or_else(tokio::time::Instant::now);
        let steps = async {
            // RFC 9114 4.1.2: a server that has its answer may stop reading the request (quinn
            // sends STOP_SENDING when the server drops the request side); the response that
            // follows is complete and must be read. A real reset shows up when reading it.
            match stream.finish().await {
                Err(h3::error::StreamError::RemoteTerminate { .. }) | Ok(()) => {}
                Err(e) => return Err(FetchError::from_err(STEPS[0], &e)),
            }
            phase.step(1);
            let resp = stream
                .recv_response()
                .await
                .map_err(|e| FetchError::from_err(STEPS[1], &e))?;
            p.headers(resp.status(), resp.headers())?;
            phase.step(2);
            while let Some(mut buf) = stream
                .recv_data()
                .await
                .map_err(|e| FetchError::from_err(STEPS[2], &e))?
            {
                phase.step(2);
                while buf.has_remaining() {
                    let n = buf.chunk().len();
                    p.data(buf.chunk())?;
                    buf.advance(n);
                }
            }
            Ok(())
        };
        let moved = Moved::Steps {
            phase: &phase,
            start: sent,
        };
        WhileMoving::new(steps, moved, self.timeout, Name::Phase(&phase))
            .lent(dog)
            .await
    }

    fn streams(&self) -> StreamFacts {
        let now = qbench_stack::quic_knobs::stats(&self.conn, Some(&self.sock));
        let mut last = self.reported.lock().expect("stats lock");
        let run = now.since(&last);
        *last = now;
        StreamFacts {
            peer_limit: self.peer.get(),
            peak: self.on_wire.take_peak(),
            quic: Some(run),
        }
    }

    fn shut(&self) {
        // H3_NO_ERROR
        self.conn.close(quinn::VarInt::from_u32(0x100), b"done");
    }
}

#[cfg(test)]
mod reorder_tests {
    use super::*;

    /// quinn keeps `packet_threshold` private; its Debug form is where the setting shows.
    #[test]
    fn reorder_threshold_reaches_quinn() {
        let mut e = Endpoint {
            addr: (Ipv4Addr::LOCALHOST, 443).into(),
            server_name: "localhost".into(),
            timeout: Duration::from_secs(10),
            rwnd: None,
            reorder_threshold: None,
            reorder_time_threshold: None,
            quic: Default::default(),
        };
        assert!(format!("{:?}", transport(&e)).contains("packet_threshold: 3,"));
        e.reorder_threshold = Some(57);
        e.reorder_time_threshold = Some(2.5);
        let t = format!("{:?}", transport(&e));
        assert!(
            t.contains("packet_threshold: 57,") && t.contains("time_threshold: 2.5,"),
            "{t}"
        );
    }
}
