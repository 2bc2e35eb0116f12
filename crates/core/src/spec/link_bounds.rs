//! The bounds of an emulated link that its fields' own parsers cannot see alone: what tc and
//! the delay path can build. `spec::link` refuses a spec past them at parse (bad input, exit
//! 2) rather than when the link is built, in tc's words.

use std::time::Duration;

/// The fastest link rate: tc holds a queue's byte limit in 32 bits, and the default queue (50
/// ms at the rate) fits up to 687 Gbit/s; 400 Gbit/s is the fastest Ethernet.
pub const MAX_RATE_BPS: u64 = 400_000_000_000;

/// The largest queue, in bytes: tc's 32-bit limit.
pub const MAX_QUEUE_BYTES: u64 = u32::MAX as u64;

/// The longest a direction holds a packet, delay and jitter together: the delay path's
/// limit. A round trip (`rtt`) is twice it.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use crate::spec::link::LinkSpec;

    /// What tc or the delay path would refuse when the link is built is refused here, naming
    /// the field: a rate or queue past tc's 32-bit counts, a delay past the path's hour.
    #[test]
    fn what_the_link_cannot_build_is_refused_naming_the_field() {
        for (spec, field) in [
            ("rate=10tbit", "`rate`"),
            ("up.rate=401gbit", "`up.rate`"),
            ("rate=10..500gbit/1s", "`rate`"),
            ("rtt=99999999999s", "`rtt`"),
            ("rtt=7201s", "`rtt`"),
            ("delay=3601s", "`delay`"),
            ("down.jitter=2h", "`down.jitter`"),
            ("delay=3000s,jitter=601s", "`up.jitter`"),
            ("queue=5GB", "`queue`"),
            ("rate=400gbit,queue=1s", "`up.queue`"),
        ] {
            let e = spec.parse::<LinkSpec>().unwrap_err().to_string();
            assert!(e.contains(field), "{spec}: {e}");
        }
        for fine in [
            "rate=400gbit",
            "rtt=7200s",
            "delay=3000s,jitter=600s",
            "queue=4GB",
            "rate=10gbit,queue=3s",
        ] {
            fine.parse::<LinkSpec>()
                .unwrap_or_else(|e| panic!("{fine}: {e}"));
        }
    }
}
