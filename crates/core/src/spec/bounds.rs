//! The ranges numeric settings must fall in, declared once: the command line's value parsers,
//! `qbench-server`'s flags and scenario files all check against these.

use std::fmt::Display;

/// `lo` to `hi` (inclusive; no upper end without `hi`), counted in `unit`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound<T> {
    pub lo: T,
    pub hi: Option<T>,
    pub unit: &'static str,
}

impl<T: Copy + PartialOrd + Display> Bound<T> {
    pub fn contains(&self, v: T) -> bool {
        v >= self.lo && self.hi.is_none_or(|hi| v <= hi)
    }

    /// `v`, or what the range is ("1 to 1000 packets").
    pub fn check(&self, v: T) -> Result<T, String> {
        match self.contains(v) {
            true => Ok(v),
            false => Err(self.to_string()),
        }
    }
}

impl<T: Display> Display for Bound<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.hi {
            Some(hi) => write!(f, "{} to {hi} {}", self.lo, self.unit),
            None => write!(f, "{} or more {}", self.lo, self.unit),
        }
    }
}

impl Bound<u32> {
    /// `v` read as a count in this range; what the range is where it is not one. The command
    /// line's flags, a scenario's fields and a side's flags all say it alike.
    pub fn parse(&self, v: &str) -> Result<u32, String> {
        match v.trim().parse::<u32>() {
            Ok(n) => self.check(n),
            Err(_) => Err(format!("`{v}` is not a whole number: {self}")),
        }
    }

    /// clap's parser for this range, saying what [`Bound::parse`] says.
    pub fn value_parser(&self) -> impl Fn(&str) -> Result<u32, String> + Clone + Send + Sync {
        let bound = *self;
        move |v| bound.parse(v)
    }
}

/// Connections per run, at most: TCP connections from one address to one server port are
/// bounded by the kernel's ephemeral port range (32768-60999 by default, about 28,000).
pub const MAX_CONNECTIONS: u32 = 25_000;

/// Worker threads of the client's or the in-process server's runtime, at most.
pub const MAX_THREADS: u32 = 256;

/// `--connections` (and a side's, and a scenario's).
pub const CONNECTIONS: Bound<u32> = Bound {
    lo: 1,
    hi: Some(MAX_CONNECTIONS),
    unit: "connections",
};

/// `--client-threads`, `--server-threads` and a scenario's `threads`.
pub const THREADS: Bound<u32> = Bound {
    lo: 1,
    hi: Some(MAX_THREADS),
    unit: "threads",
};

/// `--runs`: repetitions of a benchmark.
pub const RUNS: Bound<u32> = Bound {
    lo: 1,
    hi: None,
    unit: "runs",
};

/// `--streams`: concurrent requests per connection.
pub const STREAMS: Bound<u32> = Bound {
    lo: 1,
    hi: None,
    unit: "streams",
};

/// `--cwnd-cap` and `--initial-cwnd` (the client's and `qbench-server`'s).
pub const WINDOW_PACKETS: Bound<u32> = Bound {
    lo: 1,
    hi: None,
    unit: "packets",
};

/// `--reorder-threshold`: QUIC's packet threshold, TCP's tcp_reordering.
pub const REORDER_THRESHOLD: Bound<u32> = Bound {
    lo: 1,
    hi: Some(1000),
    unit: "packets",
};

/// `--reorder-time-threshold`: a multiple of the RTT (RFC 9002 recommends 9/8).
pub const TIME_THRESHOLD: Bound<f64> = Bound {
    lo: 1.0,
    hi: Some(10.0),
    unit: "RTTs",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_say_what_they_take() {
        assert_eq!(REORDER_THRESHOLD.check(1000), Ok(1000));
        assert_eq!(
            REORDER_THRESHOLD.check(1001),
            Err("1 to 1000 packets".into())
        );
        assert_eq!(REORDER_THRESHOLD.check(0), Err("1 to 1000 packets".into()));
        assert_eq!(CONNECTIONS.check(0), Err("1 to 25000 connections".into()));
        assert_eq!(STREAMS.check(0), Err("1 or more streams".into()));
        assert_eq!(STREAMS.check(u32::MAX), Ok(u32::MAX));
        assert_eq!(CONNECTIONS.parse(" 25000 "), Ok(25_000));
        assert_eq!(CONNECTIONS.parse("0"), Err("1 to 25000 connections".into()));
        for junk in ["", "x", "-1", "1.5", "4294967296"] {
            assert_eq!(
                STREAMS.parse(junk),
                Err(format!("`{junk}` is not a whole number: 1 or more streams"))
            );
        }
        assert!(TIME_THRESHOLD.contains(1.125) && !TIME_THRESHOLD.contains(f64::NAN));
    }

    proptest::proptest! {
        #[test]
        fn a_count_is_in_its_range_or_an_error(v in "\\PC{0,12}|[0-9 ]{1,12}") {
            for bound in [CONNECTIONS, STREAMS, THREADS, RUNS, WINDOW_PACKETS, REORDER_THRESHOLD] {
                if let Ok(n) = bound.parse(&v) {
                    proptest::prop_assert!(bound.contains(n));
                    proptest::prop_assert_eq!(v.trim().parse::<u32>(), Ok(n));
                }
            }
        }
    }
}
