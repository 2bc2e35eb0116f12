//! The forwarder's queue: packet buffers, due-time ordering (FIFO or earliest-first when
//! jitter may reorder) and the per-packet loss and jitter draws.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

/// Reusable packet buffers in two size classes. A buffer's `len()` is always its class size;
/// the packet length travels separately, so reuse never re-zeroes memory.
#[derive(Default)]
pub(super) struct Pool {
    pub(super) big: Vec<Vec<u8>>,
    pub(super) small: Vec<Vec<u8>>,
}

impl Pool {
    pub(super) fn take_big(&mut self) -> Vec<u8> {
        self.big.pop().unwrap_or_else(|| vec![0; BIG_BUF])
    }

    pub(super) fn take_small(&mut self) -> Vec<u8> {
        self.small.pop().unwrap_or_else(|| vec![0; SMALL_BUF])
    }

    pub(super) fn put(&mut self, buf: Vec<u8>) {
        match buf.len() {
            BIG_BUF if self.big.len() < POOL_KEEP_BIG => self.big.push(buf),
            SMALL_BUF if self.small.len() < POOL_KEEP_SMALL => self.small.push(buf),
            _ => {}
        }
    }
}

pub(super) struct Packet {
    pub(super) buf: Vec<u8>,
    pub(super) len: usize,
    /// Packets on the wire: a GSO super-packet's segments.
    pub(super) segs: u64,
    pub(super) due: Instant,
    /// Arrival order; breaks ties between equal due times in the heap.
    pub(super) seq: u64,
    /// Scheduled to leave before a packet that arrived earlier.
    pub(super) overtakes: bool,
}

/// Heap entry ordered so that `BinaryHeap`, a max-heap, pops the earliest due packet first.
pub(super) struct Earliest(pub(super) Packet);

impl PartialEq for Earliest {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Earliest {}

impl PartialOrd for Earliest {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Earliest {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.0.due, other.0.seq).cmp(&(self.0.due, self.0.seq))
    }
}

pub(super) enum Lane {
    /// Due times are non-decreasing, so arrival order is departure order.
    Fifo(VecDeque<Packet>),
    Heap(BinaryHeap<Earliest>),
}

pub(super) struct Queue {
    pub(super) lane: Lane,
    /// Capacity of the queued buffers.
    pub(super) bytes: usize,
    /// The writer is blocked on the condvar; only then is a notify worth a syscall.
    pub(super) writer_waiting: bool,
}

impl Queue {
    pub(super) fn new(reorder: bool) -> Self {
        Self {
            lane: if reorder {
                Lane::Heap(BinaryHeap::new())
            } else {
                Lane::Fifo(VecDeque::new())
            },
            bytes: 0,
            writer_waiting: false,
        }
    }

    pub(super) fn len(&self) -> usize {
        match &self.lane {
            Lane::Fifo(q) => q.len(),
            Lane::Heap(h) => h.len(),
        }
    }

    pub(super) fn head_due(&self) -> Option<Instant> {
        match &self.lane {
            Lane::Fifo(q) => q.front().map(|p| p.due),
            Lane::Heap(h) => h.peek().map(|e| e.0.due),
        }
    }

    pub(super) fn has_room_for(&self, p: &Packet) -> bool {
        self.len() < MAX_QUEUE_PACKETS && self.bytes + p.buf.len() <= MAX_QUEUE_BYTES
    }

    pub(super) fn push(&mut self, p: Packet) {
        self.bytes += p.buf.len();
        match &mut self.lane {
            Lane::Fifo(q) => q.push_back(p),
            Lane::Heap(h) => h.push(Earliest(p)),
        }
    }

    pub(super) fn pop(&mut self) -> Option<Packet> {
        let p = match &mut self.lane {
            Lane::Fifo(q) => q.pop_front(),
            Lane::Heap(h) => h.pop().map(|e| e.0),
        }?;
        self.bytes -= p.buf.len();
        Some(p)
    }

    /// Moves packets due by `now` into `out`, earliest first, at most `max` of them.
    pub(super) fn pop_due(&mut self, now: Instant, out: &mut Vec<Packet>, max: usize) {
        while out.len() < max && self.head_due().is_some_and(|d| d <= now) {
            match self.pop() {
                Some(p) => out.push(p),
                None => break,
            }
        }
    }

    pub(super) fn drain_all(&mut self) -> Vec<Packet> {
        std::iter::from_fn(|| self.pop()).collect()
    }
}

/// Decides each arriving packet's fate: lost, or due at a certain time.
pub(super) struct Scheduler {
    pub(super) imp: Impairment,
    pub(super) rng: SmallRng,
    /// Latest due time handed out so far.
    pub(super) last_due: Option<Instant>,
    pub(super) seq: u64,
}

pub(super) struct Slot {
    pub(super) due: Instant,
    pub(super) seq: u64,
    pub(super) overtakes: bool,
}

impl Scheduler {
    pub(super) fn new(imp: Impairment, seed: u64) -> Self {
        Self {
            imp,
            rng: SmallRng::seed_from_u64(seed),
            last_due: None,
            seq: 0,
        }
    }

    /// None when the packet is lost.
    pub(super) fn admit(&mut self, arrival: Instant) -> Option<Slot> {
        if self.imp.loss > 0.0 && self.rng.gen::<f64>() < self.imp.loss {
            return None;
        }
        let mut due = arrival + self.imp.delay + self.jitter_sample();
        let overtakes = match self.last_due {
            Some(last) if due < last && !self.imp.reorder => {
                due = last;
                false
            }
            Some(last) => due < last,
            None => false,
        };
        self.last_due = Some(self.last_due.map_or(due, |l| l.max(due)));
        self.seq += 1;
        Some(Slot {
            due,
            seq: self.seq,
            overtakes,
        })
    }

    pub(super) fn jitter_sample(&mut self) -> Duration {
        let max = self.imp.jitter.as_nanos() as u64;
        if max == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.rng.gen_range(0..=max))
    }
}
