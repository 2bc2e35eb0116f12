//! Body bytes received by this process's fetches, counted as they arrive: what a progress
//! display reads on a tick to move while a large object is still coming (an observer hears
//! of an object only once it is done). Each thread adds to a stripe of its own, so client
//! threads on different cores never write one cache line for every response chunk; the
//! reader sums the stripes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// More than a client has threads that receive; threads past it share stripes, still exact.
const STRIPES: usize = 16;

pub(crate) struct Striped {
    counts: [CachePadded<AtomicU64>; STRIPES],
}

impl Striped {
    const fn new() -> Self {
        Self {
            counts: [const { CachePadded::new(AtomicU64::new(0)) }; STRIPES],
        }
    }

    fn add(&self, stripe: usize, n: u64) {
        self.counts[stripe % STRIPES].fetch_add(n, Ordering::Relaxed);
    }

    fn total(&self) -> u64 {
        // Each stripe only grows; wrapping keeps a sum past u64 (never reached) from panicking.
        self.counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

static RECEIVED: Striped = Striped::new();
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed);
}

/// `n` more body bytes arrived on the calling thread.
pub(crate) fn add(n: u64) {
    RECEIVED.add(STRIPE.with(|s| *s), n);
}

/// Body bytes this process's fetches have received so far, objects done or not.
pub fn body_bytes_received() -> u64 {
    RECEIVED.total()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_add_up_across_threads() {
        let s = Striped::new();
        std::thread::scope(|scope| {
            for t in 0..(STRIPES + 3) {
                let s = &s;
                scope.spawn(move || {
                    for i in 0..1000 {
                        s.add(t, i);
                    }
                });
            }
        });
        assert_eq!(s.total(), (STRIPES as u64 + 3) * (999 * 1000 / 2));
    }

    #[test]
    fn a_thread_keeps_its_stripe() {
        let first = STRIPE.with(|s| *s);
        add(0);
        assert_eq!(STRIPE.with(|s| *s), first);
        let other = std::thread::spawn(|| STRIPE.with(|s| *s)).join().unwrap();
        assert_ne!(other, first);
    }
}
