//! What every connection task of one server shares: its options, the connection slots that
//! bound how many peers it holds at once, the telemetry access rule, and counters.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::access::Access;
use crate::options::ServerOptions;

/// Counters a test or an operator can read while the server runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted (TCP) or begun (QUIC), whatever became of them.
    pub accepted: AtomicU64,
    /// Connections closed or refused at once because `--max-connections` were open.
    pub refused: AtomicU64,
    /// Connections closed because the peer did not finish its handshake in time.
    pub handshake_timeouts: AtomicU64,
    /// Connections closed for `--idle-timeout` with nothing moving (TCP; quinn closes QUIC's).
    pub idle_closes: AtomicU64,
    /// Connections holding a slot now.
    pub open: AtomicUsize,
    /// Connections being sampled now: one per connection past its handshake, until its
    /// telemetry is dropped.
    pub samplers: AtomicUsize,
    /// Telemetry requests answered 429 because one was already in flight on the connection.
    pub telemetry_busy: AtomicU64,
}

impl Stats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

pub struct Shared {
    pub opts: ServerOptions,
    pub access: Access,
    pub stats: Arc<Stats>,
    /// `--stall`: responses held back for a while.
    pub stall: crate::stall::Stall,
    slots: Arc<Semaphore>,
    refusing: AtomicBool,
    /// `--qlog`: where QUIC connections write their qlog files.
    pub qlog: Option<QuicQlog>,
    /// `qbench proxy`: where requests are relayed instead of answered here.
    pub upstream: Option<crate::upstream::Upstream>,
    /// The QUIC endpoint's socket (a second handle), where telemetry reads UDP_GRO.
    pub udp: Option<Arc<std::net::UdpSocket>>,
    /// What each connection and request was seen to do (kept only when enabled).
    pub truth: Arc<crate::truth::TruthLog>,
}

/// A qlogged connection is accepted with `base` and its own qlog stream.
pub struct QuicQlog {
    pub dir: qbench_stack::qlog::QlogDir,
    pub base: quinn::ServerConfig,
}

/// One connection's hold on a slot; the slot frees when the connection task ends.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    stats: Arc<Stats>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shared {
    pub fn new(opts: ServerOptions, access: Access) -> Self {
        let slots = Arc::new(Semaphore::new(opts.max_connections as usize));
        Self {
            stall: crate::stall::Stall::new(opts.stall),
            opts,
            access,
            stats: Arc::default(),
            slots,
            refusing: AtomicBool::new(false),
            qlog: None,
            upstream: None,
            udp: None,
            truth: Arc::default(),
        }
    }

    /// A slot for a new connection, or `None` when `--max-connections` are open.
    pub fn admit(&self, peer: SocketAddr) -> Option<Slot> {
        Stats::bump(&self.stats.accepted);
        match self.slots.clone().try_acquire_owned() {
            Ok(permit) => {
                self.refusing.store(false, Ordering::Relaxed);
                self.stats.open.fetch_add(1, Ordering::Relaxed);
                Some(Slot {
                    _permit: permit,
                    stats: self.stats.clone(),
                })
            }
            Err(_) => {
                Stats::bump(&self.stats.refused);
                // Said once per burst: a flood of refusals must not become a flood of lines.
                if !self.refusing.swap(true, Ordering::Relaxed) {
                    crate::note!(
                        "qbench-server: --max-connections {} reached; refusing {peer} and \
                         whoever else connects until a connection closes",
                        self.opts.max_connections
                    );
                }
                None
            }
        }
    }
}
