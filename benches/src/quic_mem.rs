//! Two quinn-proto endpoints joined in memory: no sockets, no runtime, no timers. The server
//! streams data to the client (the direction of a qbench download), and each round is timed in
//! three parts so the benches can attribute cost to packet production, consumption and ACK
//! processing separately.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::congestion::CubicConfig;
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, ReadError,
    StreamId, TransportConfig, VarInt, WriteError,
};

use crate::tls::{quic_pair, Suite};

const CLIENT: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 40001);
const SERVER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 40002);

/// Datagrams one round may hold. quinn-proto's pacer allows a burst of 256 packets at one
/// instant, and a round uses a single `now`, so rounds stay below that.
pub const MAX_ROUND: usize = 128;

/// Time spent in each part of one round.
#[derive(Debug, Default, Clone, Copy)]
pub struct RoundTimes {
    /// Sender: `poll_transmit` building, sealing and protecting the data packets.
    pub produce: Duration,
    /// Receiver: unprotect, open, reassemble, read the stream, and build the ACKs.
    pub consume: Duration,
    /// Sender: processing those ACKs (loss detection, congestion control, freeing data).
    pub ack: Duration,
    /// Datagrams the sender produced in the round.
    pub datagrams: usize,
    /// Datagrams that filled the MTU.
    pub full: usize,
}

struct Side {
    ep: Endpoint,
    addr: SocketAddr,
    conn: Option<(ConnectionHandle, Connection)>,
}

impl Side {
    fn conn(&mut self) -> &mut Connection {
        &mut self.conn.as_mut().expect("connection established").1
    }

    /// Hands one datagram to the endpoint, as quinn's endpoint driver does after `recvmmsg`.
    fn receive(&mut self, now: Instant, from: SocketAddr, data: BytesMut, scratch: &mut Vec<u8>) {
        match self.ep.handle(now, from, None, None, data, scratch) {
            Some(DatagramEvent::ConnectionEvent(_, ev)) => self.conn().handle_event(ev),
            Some(DatagramEvent::NewConnection(incoming)) => {
                let accepted = self
                    .ep
                    .accept(incoming, now, scratch, None)
                    .expect("server accepts the connection");
                self.conn = Some(accepted);
            }
            Some(DatagramEvent::Response(_)) => panic!("unexpected stateless response"),
            None => {}
        }
    }

    fn endpoint_events(&mut self) {
        let Some((ch, conn)) = self.conn.as_mut() else {
            return;
        };
        while let Some(ev) = conn.poll_endpoint_events() {
            if let Some(back) = self.ep.handle_event(*ch, ev) {
                conn.handle_event(back);
            }
        }
        while conn.poll().is_some() {}
    }
}

/// Transmit buffers reused across rounds, so allocation stays out of the timed parts.
#[derive(Default)]
struct Outbox {
    bufs: Vec<Vec<u8>>,
    strides: Vec<usize>,
    used: usize,
}

impl Outbox {
    fn clear(&mut self) {
        self.used = 0;
    }

    fn next(&mut self, capacity: usize) -> &mut Vec<u8> {
        if self.used == self.bufs.len() {
            self.bufs.push(Vec::with_capacity(capacity));
            self.strides.push(0);
        }
        let buf = &mut self.bufs[self.used];
        buf.clear();
        buf
    }

    fn commit(&mut self, stride: usize) {
        self.strides[self.used] = stride;
        self.used += 1;
    }

    fn datagrams(&self) -> impl Iterator<Item = &[u8]> {
        self.bufs[..self.used]
            .iter()
            .zip(&self.strides)
            .flat_map(|(buf, &stride)| buf.chunks(stride))
    }
}

/// An established connection with one unidirectional stream from server to client.
pub struct MemPair {
    client: Side,
    server: Side,
    stream: Option<StreamId>,
    client_stream: Option<StreamId>,
    mtu: usize,
    pattern: Vec<u8>,
    data: Outbox,
    acks: Outbox,
    scratch: Vec<u8>,
    /// Stream bytes the server has accepted for sending.
    pub written: u64,
    /// Stream bytes the client has read.
    pub received: u64,
}

fn transport(mtu: u16) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.initial_mtu(mtu)
        .min_mtu(mtu)
        .mtu_discovery_config(None)
        .stream_receive_window(VarInt::from_u32(64 << 20))
        .receive_window(VarInt::MAX)
        .send_window(64 << 20);
    // A congestion window no in-memory round can fill: the benches measure per-packet work,
    // and a sender waiting on cwnd would measure nothing.
    let mut cubic = CubicConfig::default();
    cubic.initial_window(1 << 30);
    t.congestion_controller_factory(Arc::new(cubic));
    t
}

impl MemPair {
    /// Completes a handshake negotiating `suite`, with every datagram exactly `mtu` bytes.
    pub fn new(suite: Suite, mtu: u16) -> Self {
        let (mut client_cfg, mut server_cfg) = quic_pair(suite);
        let transport = Arc::new(transport(mtu));
        client_cfg.transport_config(transport.clone());
        server_cfg.transport_config(transport);
        let endpoint = Arc::new(EndpointConfig::default());
        let mut client = Side {
            ep: Endpoint::new(endpoint.clone(), None, false, None),
            addr: CLIENT,
            conn: None,
        };
        let server = Side {
            ep: Endpoint::new(endpoint, Some(Arc::new(server_cfg)), false, None),
            addr: SERVER,
            conn: None,
        };
        client.conn = Some(
            client
                .ep
                .connect(Instant::now(), client_cfg, SERVER, "localhost")
                .expect("client connects"),
        );
        let mut pair = Self {
            client,
            server,
            stream: None,
            client_stream: None,
            mtu: mtu.into(),
            pattern: (0..=255u8).cycle().take(1 << 20).collect(),
            data: Outbox::default(),
            acks: Outbox::default(),
            scratch: Vec::new(),
            written: 0,
            received: 0,
        };
        pair.handshake();
        pair
    }

    fn handshake(&mut self) {
        for _ in 0..64 {
            let moved = self.flush_client() + self.flush_server();
            let done = self.server.conn.is_some()
                && !self.client.conn().is_handshaking()
                && !self.server.conn().is_handshaking();
            if done && moved == 0 {
                self.stream = self.server.conn().streams().open(Dir::Uni);
                assert!(self.stream.is_some(), "server opens a stream");
                return;
            }
        }
        panic!("in-memory handshake did not complete");
    }

    /// Sends everything `from` has queued to `to`, untimed. Returns the datagrams moved.
    fn flush(from: &mut Side, to: &mut Side, out: &mut Outbox, mtu: usize) -> usize {
        let now = Instant::now();
        from.endpoint_events();
        out.clear();
        while let Some(t) = from.conn().poll_transmit(now, 1, out.next(mtu)) {
            out.commit(t.segment_size.unwrap_or(t.size));
        }
        let mut scratch = Vec::new();
        let mut moved = 0;
        for d in out.datagrams() {
            to.receive(now, from.addr, BytesMut::from(d), &mut scratch);
            moved += 1;
        }
        to.endpoint_events();
        moved
    }

    fn flush_client(&mut self) -> usize {
        Self::flush(&mut self.client, &mut self.server, &mut self.acks, self.mtu)
    }

    fn flush_server(&mut self) -> usize {
        Self::flush(&mut self.server, &mut self.client, &mut self.data, self.mtu)
    }

    /// Keeps at least `bytes` of stream data queued at the sender.
    fn top_up(&mut self, bytes: usize) {
        let queued = (self.written - self.received) as usize;
        let mut want = bytes.saturating_sub(queued);
        while want > 0 {
            let n = want.min(self.pattern.len());
            match self
                .server
                .conn
                .as_mut()
                .expect("server connection")
                .1
                .send_stream(self.stream.expect("stream opened"))
                .write(&self.pattern[..n])
            {
                Ok(w) => {
                    self.written += w as u64;
                    want -= w;
                }
                Err(WriteError::Blocked) => break,
                Err(e) => panic!("stream write failed: {e}"),
            }
        }
    }

    fn read_stream(&mut self) {
        let conn = self.client.conn();
        let id = match self.client_stream {
            Some(id) => id,
            None => match conn.streams().accept(Dir::Uni) {
                Some(id) => {
                    self.client_stream = Some(id);
                    id
                }
                None => return,
            },
        };
        let mut stream = conn.recv_stream(id);
        let mut chunks = stream.read(true).expect("stream readable");
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => self.received += chunk.bytes.len() as u64,
                Ok(None) => panic!("stream finished unexpectedly"),
                Err(ReadError::Blocked) => break,
                Err(e) => panic!("stream read failed: {e}"),
            }
        }
        // Whether a flow-control update is due is decided again by the next poll_transmit.
        let _ = chunks.finalize();
    }

    /// One round: the sender produces `count` datagrams in `poll_transmit` calls of up to
    /// `per_call` datagrams (1 = one packet per call, larger = a GSO batch); the receiver takes
    /// them `per_call` at a time, as one `recvmmsg`/GRO batch, and answers; the sender
    /// processes the answer.
    pub fn round(&mut self, count: usize, per_call: usize) -> RoundTimes {
        assert!(count <= MAX_ROUND && per_call >= 1);
        self.top_up(count * self.mtu * 2);
        let mut times = RoundTimes::default();

        let now = Instant::now();
        self.data.clear();
        let server = self.server.conn.as_mut().expect("server connection");
        let start = Instant::now();
        while times.datagrams < count {
            let buf = self.data.next(self.mtu * per_call);
            let Some(t) = server.1.poll_transmit(now, per_call, buf) else {
                panic!("sender stalled after {} datagrams", times.datagrams);
            };
            let stride = t.segment_size.unwrap_or(t.size);
            times.datagrams += t.size.div_ceil(stride);
            self.data.commit(stride);
        }
        times.produce = start.elapsed();
        times.full = self
            .data
            .datagrams()
            .filter(|d| d.len() == self.mtu)
            .count();

        let now = Instant::now();
        self.acks.clear();
        let start = Instant::now();
        let mut in_step = 0;
        let data = std::mem::take(&mut self.data);
        for d in data.datagrams() {
            // quinn's endpoint driver copies each datagram out of its receive buffer too.
            self.client
                .receive(now, SERVER, BytesMut::from(d), &mut self.scratch);
            in_step += 1;
            if in_step == per_call {
                in_step = 0;
                self.answer(now);
            }
        }
        if in_step > 0 {
            self.answer(now);
        }
        times.consume = start.elapsed();
        self.data = data;

        let now = Instant::now();
        let start = Instant::now();
        for i in 0..self.acks.used {
            let stride = self.acks.strides[i];
            for d in self.acks.bufs[i].chunks(stride) {
                self.server
                    .receive(now, CLIENT, BytesMut::from(d), &mut self.scratch);
            }
        }
        self.server.endpoint_events();
        times.ack = start.elapsed();
        times
    }

    /// The receiver's work after a batch: endpoint bookkeeping, reading, and ACKs.
    fn answer(&mut self, now: Instant) {
        self.client.endpoint_events();
        self.read_stream();
        let conn = &mut self.client.conn.as_mut().expect("client connection").1;
        loop {
            let buf = self.acks.next(self.mtu);
            match conn.poll_transmit(now, 1, buf) {
                Some(t) => self.acks.commit(t.segment_size.unwrap_or(t.size)),
                None => break,
            }
        }
    }

    /// Delivers everything still in flight, so `written == received` can be checked.
    pub fn drain(&mut self) {
        for _ in 0..1000 {
            let moved = self.flush_server() + self.flush_client();
            self.read_stream();
            if moved == 0 && self.written == self.received {
                return;
            }
        }
        panic!(
            "stream did not drain: {} written, {} received",
            self.written, self.received
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_sent_arrives_in_full_size_packets() {
        for suite in Suite::ALL {
            for (mtu, per_call) in [(1200u16, 1usize), (1452, 10)] {
                let mut pair = MemPair::new(suite, mtu);
                let mut datagrams = 0;
                let mut full = 0;
                for _ in 0..50 {
                    let t = pair.round(64, per_call);
                    datagrams += t.datagrams;
                    full += t.full;
                }
                assert!(datagrams >= 50 * 64);
                // Only the odd ACK-only or flow-control packet may be short.
                assert!(
                    full * 100 >= datagrams * 95,
                    "{suite:?}/{mtu}: {full} of {datagrams} full"
                );
                pair.drain();
                assert_eq!(pair.written, pair.received);
                assert!(pair.received >= (full * (usize::from(mtu) - 60)) as u64);
            }
        }
    }
}
