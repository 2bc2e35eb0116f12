//! QUIC's userspace cost per packet, in memory with quinn-proto (no sockets, no runtime).
//!
//! An established connection streams data from server to client in rounds of 64 datagrams.
//! Each benchmark runs whole rounds but times only its own part, so one iteration is one
//! full-size data packet in all three:
//! - `produce`: the sender's `poll_transmit` (stream framing, AEAD seal, header protection);
//! - `consume`: the receiver's datagram handling (header unprotect, AEAD open, reassembly),
//!   reading the stream and building ACKs;
//! - `ack`: the sender processing those ACKs (loss detection, congestion control, freeing
//!   acknowledged data).
//!
//! `single` produces one packet per `poll_transmit` and answers every packet; `gso` produces
//! ten per call (quinn's GSO batch) and answers once per ten, as after one GRO read.

use std::time::Duration;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use qbench_benches::quic_mem::{MemPair, RoundTimes};
use qbench_benches::tls::Suite;

const ROUND: usize = 64;
const GSO_SEGMENTS: usize = 10;

fn part(c: &mut Criterion, name: &str, pick: fn(&RoundTimes) -> Duration) {
    let mut group = c.benchmark_group("quic_packet");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    for suite in Suite::ALL {
        for mtu in [1200u16, 1452] {
            for (mode, per_call) in [("single", 1), ("gso", GSO_SEGMENTS)] {
                let mut pair = MemPair::new(suite, mtu);
                group.throughput(Throughput::Bytes(mtu.into()));
                let id = format!("{}-{mtu}-{mode}", suite.name());
                group.bench_function(BenchmarkId::new(name, id), |b| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        let mut packets = 0u64;
                        while packets < iters {
                            let t = pair.round(ROUND, per_call);
                            total += pick(&t);
                            packets += t.datagrams as u64;
                        }
                        // Rounds overshoot `iters`; scale to the packets asked for.
                        total.mul_f64(iters as f64 / packets as f64)
                    })
                });
            }
        }
    }
    group.finish();
}

fn produce(c: &mut Criterion) {
    part(c, "produce", |t| t.produce);
}

fn consume(c: &mut Criterion) {
    part(c, "consume", |t| t.consume);
}

fn ack(c: &mut Criterion) {
    part(c, "ack", |t| t.ack);
}

criterion_group!(benches, produce, consume, ack);
fn main() {
    // Copies as qbench's binaries make them, so the costs compare like for like.
    qbench_stack::rep_movsb::at_start_or_exit();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
