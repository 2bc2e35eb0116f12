//! `--start-at`: a start barrier on the wall clock, so that copies of a command started by a
//! launcher on many machines begin together without a coordinator.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How `--start-at` names the barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartAt {
    /// A wall-clock time (RFC 3339, or unix seconds).
    At(SystemTime),
    /// `+30s@FILE`: this long after a shared file's modification time (`FILE` absent: after
    /// now, for one machine).
    After {
        delay: Duration,
        file: Option<PathBuf>,
    },
}

/// The longest wait: a barrier further ahead is surely a mistake in the time.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// `2026-11-24T10:00:00Z`, `1795514400` (unix seconds, fraction allowed), `+30s` or
/// `+30s@/shared/start`.
pub fn parse_start_at(s: &str) -> Result<StartAt, String> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix('+') {
        let (delay, file) = match rest.split_once('@') {
            Some((d, f)) if !f.is_empty() => (d, Some(PathBuf::from(f))),
            Some(_) => return Err(format!("`{s}`: give the shared file after @")),
            None => (rest, None),
        };
        let delay = humantime::parse_duration(delay)
            .map_err(|e| format!("`{delay}` is not a delay (e.g. 30s): {e}"))?;
        if delay > MAX_WAIT {
            return Err(format!(
                "`{s}`: at most {} ahead",
                humantime::format_duration(MAX_WAIT)
            ));
        }
        return Ok(StartAt::After { delay, file });
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = t
            .parse()
            .map_err(|_| format!("`{s}` is not a unix time in seconds"))?;
        let at = Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("`{s}` is not a unix time in seconds"))?;
        return UNIX_EPOCH
            .checked_add(at)
            .map(StartAt::At)
            .ok_or_else(|| format!("`{s}` is too far in the future"));
    }
    humantime::parse_rfc3339_weak(t).map(StartAt::At).map_err(|_| {
        format!("`{s}` is not an RFC 3339 time (2026-11-24T10:00:00Z), unix seconds, or +DELAY[@FILE]")
    })
}

/// The clock's synchronization as the kernel reports it (`adjtimex`), read when the barrier
/// was reached: how far apart two machines' starts can be is bounded by their errors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockSync {
    /// The kernel's clock state: `ok`, `unsynchronized`, or a leap-second state.
    pub state: Option<String>,
    /// False when the kernel marks the clock unsynchronized (no NTP/PTP discipline).
    pub synchronized: Option<bool>,
    /// Estimated and maximum error, microseconds.
    pub est_error_us: Option<i64>,
    pub max_error_us: Option<i64>,
}

/// How close to the barrier a copy started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StartRecord {
    /// `--start-at` as given.
    pub at: String,
    pub barrier_unix_us: u64,
    /// Wall clock when the first run started.
    pub started_unix_us: u64,
    /// Started minus barrier, microseconds.
    pub skew_us: i64,
    /// The barrier had passed before this copy reached it: it started at once.
    pub late: bool,
    pub clock: ClockSync,
}

/// Unix microseconds of a wall-clock time (0 before 1970).
pub fn unix_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_of_the_barrier() {
        assert_eq!(
            parse_start_at("1795514400"),
            Ok(StartAt::At(UNIX_EPOCH + Duration::from_secs(1_795_514_400)))
        );
        assert_eq!(
            parse_start_at("1795514400.5"),
            Ok(StartAt::At(
                UNIX_EPOCH + Duration::from_millis(1_795_514_400_500)
            ))
        );
        assert_eq!(
            parse_start_at("2026-11-24T10:00:00Z"),
            Ok(StartAt::At(UNIX_EPOCH + Duration::from_secs(1_795_514_400)))
        );
        assert_eq!(
            parse_start_at("+30s@/shared/go"),
            Ok(StartAt::After {
                delay: Duration::from_secs(30),
                file: Some("/shared/go".into())
            })
        );
        assert_eq!(
            parse_start_at("+1m"),
            Ok(StartAt::After {
                delay: Duration::from_secs(60),
                file: None
            })
        );
        for bad in [
            "",
            "soon",
            "+",
            "+30s@",
            "+2days@x",
            "1.2.3",
            "2026-13-01T00:00:00Z",
        ] {
            assert!(parse_start_at(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn start_at_parser_never_panics(s in "\\PC{0,40}") {
            let _ = parse_start_at(&s);
        }

        #[test]
        fn digits_never_panic(s in "[0-9.]{1,40}") {
            let _ = parse_start_at(&s);
        }
    }
}
