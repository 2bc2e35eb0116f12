//! The userspace cost of one TLS 1.3 record over TCP, in memory with rustls (no sockets).
//!
//! A real rustls client/server handshake is completed by pumping bytes between the two
//! connections, then the server sends application data to the client, as in a download:
//! - `seal`: the sender's `writer().write_all` of one record's worth of plaintext (fragmenting,
//!   AEAD seal, queueing) and `write_tls` into a reused buffer, i.e. what tokio-rustls does
//!   before the socket write;
//! - `open`: the receiver's `read_tls` + `process_new_packets` + `reader().read`, fed the sealed
//!   records as one byte stream in rustls's own read size, as tokio-rustls reads a TCP socket.
//!   Records are sealed in untimed batches of about 1 MiB so only the receiver is timed.
//!
//! One iteration is one record; the parameter is its plaintext size: 16384 bytes is the TLS
//! maximum (and rustls's default fragment size), 1450 bytes is about what one full-size QUIC
//! packet carries, for comparison with `quic_packet`. Kernel and socket costs are left to
//! `socket_io`.

use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use qbench_benches::tls::{pair, Suite};
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, ConnectionCommon, ServerConnection};

/// TLS 1.3 record header, inner content type byte and the 16-byte AEAD tag.
const RECORD_OVERHEAD: usize = 5 + 1 + 16;
/// rustls fragments application data at this size unless `max_fragment_size` is set.
const MAX_PLAINTEXT: usize = 16384;
const SIZES: [usize; 2] = [MAX_PLAINTEXT, 1450];
const SUITES: [Suite; 3] = Suite::ALL;
/// AES-GCM keys are good for 2^24 records in rustls, after which it sends a KeyUpdate that
/// would add a record to a measured write; reconnect well before that.
const RECORDS_PER_CONNECTION: u64 = 1 << 22;
/// Sealed bytes per untimed batch in `open`: large enough that the per-batch clock reads
/// vanish, small enough to stay out of the way of memory use.
const OPEN_BATCH_BYTES: usize = 1 << 20;

/// Moves everything `from` has queued to `to` and lets `to` process it.
fn transfer<A, B>(from: &mut ConnectionCommon<A>, to: &mut ConnectionCommon<B>) {
    let mut wire = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut wire).expect("write_tls to a Vec");
    }
    let mut rest = &wire[..];
    while !rest.is_empty() {
        to.read_tls(&mut rest).expect("read_tls from memory");
        to.process_new_packets().expect("handshake bytes accepted");
    }
}

/// An established connection, server sending to client.
struct Link {
    client: ClientConnection,
    server: ServerConnection,
    /// Records sealed with the current traffic keys.
    sealed: u64,
    suite: Suite,
}

impl Link {
    fn new(suite: Suite) -> Self {
        let configs = pair(suite, b"qbench-bench");
        let name = ServerName::try_from("localhost").expect("server name");
        let mut client =
            ClientConnection::new(Arc::clone(&configs.client), name).expect("client connection");
        let mut server =
            ServerConnection::new(Arc::clone(&configs.server)).expect("server connection");
        // Until both sides are quiet, so the session tickets are not left in flight to be
        // mistaken for application records.
        while client.is_handshaking()
            || server.is_handshaking()
            || client.wants_write()
            || server.wants_write()
        {
            transfer(&mut client, &mut server);
            transfer(&mut server, &mut client);
        }
        let negotiated = server
            .negotiated_cipher_suite()
            .expect("negotiated suite")
            .suite();
        assert_eq!(
            Some(negotiated),
            client.negotiated_cipher_suite().map(|s| s.suite())
        );
        let mut link = Self {
            client,
            server,
            sealed: 0,
            suite,
        };
        link.check_round_trip();
        link
    }

    /// Seals `plaintext` as one record, appended to `out`.
    #[inline]
    fn seal(&mut self, plaintext: &[u8], out: &mut Vec<u8>) {
        let before = out.len();
        self.server
            .writer()
            .write_all(plaintext)
            .expect("plaintext accepted");
        self.server.write_tls(out).expect("write_tls to a Vec");
        assert_eq!(
            out.len() - before,
            plaintext.len() + RECORD_OVERHEAD,
            "one write must become exactly one record"
        );
        self.sealed += 1;
    }

    /// Makes sure `records` more records can be sealed without a key update.
    fn reserve(&mut self, records: u64) {
        if self.sealed + records > RECORDS_PER_CONNECTION {
            *self = Self::new(self.suite);
        }
    }

    /// Feeds `wire` to the client and reads all plaintext out, returning its length.
    #[inline]
    fn open(&mut self, mut wire: &[u8], plain: &mut [u8]) -> usize {
        let mut got = 0;
        while !wire.is_empty() {
            self.client.read_tls(&mut wire).expect("read_tls");
            self.client
                .process_new_packets()
                .expect("records authenticated");
            loop {
                match self.client.reader().read(plain) {
                    Ok(0) => panic!("unexpected close_notify"),
                    Ok(n) => got += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("reading plaintext: {e}"),
                }
            }
        }
        got
    }

    /// The measured paths only count bytes; check once that they carry the right ones.
    fn check_round_trip(&mut self) {
        let sent: Vec<u8> = (0..MAX_PLAINTEXT).map(|i| (i % 251) as u8).collect();
        let mut wire = Vec::new();
        self.seal(&sent, &mut wire);
        let mut received = Vec::new();
        let mut rest = &wire[..];
        while !rest.is_empty() {
            self.client.read_tls(&mut rest).expect("read_tls");
            self.client
                .process_new_packets()
                .expect("record authenticated");
        }
        match self.client.reader().read_to_end(&mut received) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("expected the reader to run dry, got {other:?}"),
        }
        assert!(received == sent, "round trip altered the plaintext");
    }
}

fn group(c: &mut Criterion) -> BenchmarkGroup<'_, WallTime> {
    let mut group = c.benchmark_group("tls_record");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40);
    group
}

fn seal(c: &mut Criterion) {
    let mut group = group(c);
    for suite in SUITES {
        let mut link = Link::new(suite);
        for size in SIZES {
            let plaintext = vec![0x5a; size];
            let mut out = Vec::with_capacity(size + RECORD_OVERHEAD);
            group.throughput(Throughput::Bytes(size as u64));
            let id = format!("{}-{size}", suite.name());
            group.bench_function(BenchmarkId::new("seal", id), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut done = 0;
                    while done < iters {
                        let n = (iters - done).min(RECORDS_PER_CONNECTION);
                        link.reserve(n);
                        let start = Instant::now();
                        for _ in 0..n {
                            out.clear();
                            link.seal(&plaintext, &mut out);
                        }
                        total += start.elapsed();
                        done += n;
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

fn open(c: &mut Criterion) {
    let mut group = group(c);
    for suite in SUITES {
        let mut link = Link::new(suite);
        for size in SIZES {
            let plaintext = vec![0x5a; size];
            let batch = (OPEN_BATCH_BYTES / size).max(1) as u64;
            let mut wire = Vec::with_capacity(batch as usize * (size + RECORD_OVERHEAD));
            let mut plain = vec![0; 2 * MAX_PLAINTEXT];
            group.throughput(Throughput::Bytes(size as u64));
            let id = format!("{}-{size}", suite.name());
            group.bench_function(BenchmarkId::new("open", id), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut done = 0;
                    while done < iters {
                        let n = (iters - done).min(batch);
                        link.reserve(n);
                        wire.clear();
                        for _ in 0..n {
                            link.seal(&plaintext, &mut wire);
                        }
                        let start = Instant::now();
                        let got = link.open(&wire, &mut plain);
                        total += start.elapsed();
                        assert_eq!(got, n as usize * size, "plaintext lost or duplicated");
                        done += n;
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, seal, open);
fn main() {
    // Copies as qbench's binaries make them, so the costs compare like for like.
    qbench_stack::rep_movsb::at_start_or_exit();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
