//! Shared fixtures for the criterion benches and the raw transfer baselines: TLS configurations
//! pinned to one cipher suite, so every bench states which AEAD it measured.

pub mod baseline;
pub mod mem_link;
pub mod quic_mem;
pub mod raw_h3;
pub mod sys;
pub mod tls;

/// Connection `k`'s part of `total` requests spread over `connections`, each with a counter
/// of its own, as qbench's workers take their connection's objects. One counter for all
/// connections, as before, read 2-3% fewer requests/s for the pinned h3 floor (7 of 8
/// alternating pairs slower): a floor unlike qbench's workload, and lower than it is.
pub fn part(total: u64, connections: u32, k: u32) -> u64 {
    let c = u64::from(connections.max(1));
    total / c + u64::from(u64::from(k) < total % c)
}

#[cfg(test)]
mod tests {
    use super::part;
    use proptest::prelude::*;

    proptest! {
        /// The parts add up to the whole and differ by at most one.
        #[test]
        fn parts_add_up(total in 0u64..10_000_000, connections in 1u32..5_000) {
            let parts: Vec<u64> = (0..connections).map(|k| part(total, connections, k)).collect();
            prop_assert_eq!(parts.iter().sum::<u64>(), total);
            let (lo, hi) = (parts.iter().min().unwrap(), parts.iter().max().unwrap());
            prop_assert!(hi - lo <= 1);
        }
    }
}
