//! `--stall AFTER+FOR`: a documented misbehaviour, to show coordinated omission. AFTER the
//! first request, every response waits until FOR has passed, as a server pausing (a garbage
//! collection, a failover) would; then the server answers normally again.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// The longest stall: a stalled response holds its request, bounded like any wait.
pub const MAX_STALL: Duration = Duration::from_secs(60);
/// The latest start of a stall after the first request.
pub const MAX_STALL_AFTER: Duration = Duration::from_secs(3600);

/// When responses stall, counted from the first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallSpec {
    pub after: Duration,
    pub length: Duration,
}

/// `5s+1s`: 5 s after the first request, responses wait 1 s.
pub fn parse_stall(s: &str) -> Result<StallSpec, String> {
    let (a, l) = s
        .split_once('+')
        .ok_or_else(|| format!("`{s}`: give AFTER+FOR, e.g. 5s+1s"))?;
    let parse = |t: &str| humantime::parse_duration(t.trim()).map_err(|e| format!("`{t}`: {e}"));
    let (after, length) = (parse(a)?, parse(l)?);
    if length.is_zero() || length > MAX_STALL {
        return Err(format!("`{l}`: a stall lasts more than 0 and at most 60s"));
    }
    if after > MAX_STALL_AFTER {
        return Err(format!(
            "`{a}`: a stall starts within an hour of the first request"
        ));
    }
    Ok(StallSpec { after, length })
}

/// The stall of a running server.
#[derive(Debug)]
pub struct Stall {
    spec: Option<StallSpec>,
    first: OnceLock<Instant>,
}

impl Stall {
    pub fn new(spec: Option<StallSpec>) -> Self {
        Self {
            spec,
            first: OnceLock::new(),
        }
    }

    /// Before answering a request: waits out the stall if it is on.
    pub async fn wait(&self) {
        let Some(spec) = self.spec else {
            return;
        };
        let first = *self.first.get_or_init(Instant::now);
        let (start, end) = (first + spec.after, first + spec.after + spec.length);
        let now = Instant::now();
        if now >= start && now < end {
            tokio::time::sleep_until(end).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_parse_within_bounds() {
        let s = parse_stall("5s+1s").unwrap();
        assert_eq!(
            (s.after, s.length),
            (Duration::from_secs(5), Duration::from_secs(1))
        );
        for bad in ["5s", "5s+0s", "5s+61s", "2h+1s", "x+1s", "+", ""] {
            assert!(parse_stall(bad).is_err(), "{bad}");
        }
    }

    /// On tokio's paused clock: a request in the window waits until its end; one after it
    /// does not wait at all.
    #[tokio::test(start_paused = true)]
    async fn responses_in_the_window_wait_for_its_end() {
        let stall = Stall::new(Some(parse_stall("100ms+1s").unwrap()));
        let t0 = Instant::now();
        stall.wait().await;
        assert_eq!(
            t0.elapsed(),
            Duration::ZERO,
            "the first request starts the clock"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        stall.wait().await;
        assert_eq!(t0.elapsed(), Duration::from_millis(1100));
        stall.wait().await;
        assert_eq!(t0.elapsed(), Duration::from_millis(1100));
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_stall_or_an_error(s in "\\PC{0,30}") {
            let _ = parse_stall(&s);
        }
    }
}
