//! Packet-delivery traces in Mahimahi's format (`rate=mahimahi:FILE`), the format of the
//! cellular traces Mahimahi, Pantheon and many papers use: one line per opportunity to deliver
//! one MTU-sized packet, as a whole number of milliseconds since the start; several lines with
//! the same time are several packets in that millisecond. The trace loops, as Mahimahi's does:
//! its period is its last timestamp.
//!
//! A trace becomes one rate per window of [`WINDOW_MS`]: the bytes its opportunities could
//! deliver in the window, over the window, and the packets of a window leave evenly spaced.
//! The link holds these rates with an htb class, whose tokens are time: a packet leaves when
//! the class owes none and then owes its length at the rate of that moment. An empty window
//! cannot be a rate (htb has no rate 0, and a packet let out at its floor would owe more than
//! a second), so the time of a run of empty windows is owed by the last packet before it: that
//! packet's slot gets a rate that spreads one packet over the slot and the gap, and the next
//! packet leaves when the gap ends. Volume per window and every gap are kept.

use std::time::Duration;

use crate::spec::link::{LinkError, MIN_RATE_BPS};
use crate::units::Rate;

/// Bytes one delivery opportunity carries (Mahimahi's MTU-sized packet).
pub const OPPORTUNITY_BYTES: u64 = 1500;
/// The length of the windows a trace's rate is stepped in.
pub const WINDOW_MS: u64 = 10;
/// The longest period a trace may have: an hour of 10 ms windows is 360,000 steps.
pub const MAX_PERIOD_MS: u64 = 3_600_000;

/// A delivery trace as tbf rates: `steps` start at 0 and hold until the next one, and the
/// whole repeats every `period`.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub period: Duration,
    pub steps: Vec<(Duration, Rate)>,
    /// Delivery opportunities in one period.
    pub opportunities: u64,
}

impl Delivery {
    /// The mean rate over a period: what a saturating flow gets on average.
    pub fn mean(&self) -> Rate {
        let bits = self.opportunities as f64 * OPPORTUNITY_BYTES as f64 * 8.0;
        Rate((bits / self.period.as_secs_f64()).round() as u64)
    }

    /// The bits the steps carry from `from` to `to`, both times on the loop's clock (the loop
    /// starts again every period from its zero).
    pub fn bits_between(&self, from: Duration, to: Duration) -> f64 {
        let p = self.period.as_secs_f64();
        // Bits in [0, t) of one period, for t within it.
        let within = |t: f64| {
            let mut bits = 0.0;
            for (i, (at, r)) in self.steps.iter().enumerate() {
                let a = at.as_secs_f64();
                if a >= t {
                    break;
                }
                let end = self.steps.get(i + 1).map_or(p, |(n, _)| n.as_secs_f64());
                bits += r.0 as f64 * (end.min(t) - a);
            }
            bits
        };
        let whole = within(p);
        let upto = |t: f64| (t / p).floor() * whole + within(t.rem_euclid(p));
        upto(to.as_secs_f64()) - upto(from.as_secs_f64())
    }

    pub fn peak(&self) -> Rate {
        self.steps
            .iter()
            .map(|(_, r)| *r)
            .max()
            .unwrap_or(Rate(MIN_RATE_BPS))
    }
}

const MS: u64 = 1_000_000;

/// The rate that carries `n` opportunities in `ns` nanoseconds, in bit/s.
fn bits_over(n: u64, ns: u64) -> u64 {
    let bits = u128::from(n) * u128::from(OPPORTUNITY_BYTES) * 8 * 1_000_000_000;
    u64::try_from((bits + u128::from(ns) / 2) / u128::from(ns.max(1))).unwrap_or(u64::MAX)
}

fn err(line: usize, message: impl Into<String>) -> LinkError {
    LinkError::Trace {
        line,
        message: message.into(),
    }
}

/// Parses a Mahimahi trace. Blank lines and `#` comments are skipped; times must not decrease.
pub fn parse_mahimahi(text: &str) -> Result<Delivery, LinkError> {
    let (counts, period, opportunities) = windows(text)?;
    Ok(Delivery {
        period: Duration::from_millis(period),
        steps: merged(rate_steps(&counts, period * MS)),
        opportunities,
    })
}

/// The trace's delivery opportunities counted per window, its period in ms (its last time),
/// and how many opportunities it holds.
fn windows(text: &str) -> Result<(Vec<u64>, u64, u64), LinkError> {
    let mut counts: Vec<u64> = Vec::new();
    let (mut last, mut opportunities) = (None::<u64>, 0u64);
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let ms: u64 = line.parse().map_err(|_| {
            err(
                i + 1,
                format!("`{line}` is not a whole number of milliseconds"),
            )
        })?;
        if ms > MAX_PERIOD_MS {
            return Err(err(
                i + 1,
                format!("{ms} ms is past the longest period, {MAX_PERIOD_MS} ms"),
            ));
        }
        if let Some(prev) = last.filter(|p| ms < *p) {
            return Err(err(
                i + 1,
                format!("{ms} ms comes after {prev} ms: times must not decrease"),
            ));
        }
        last = Some(ms);
        opportunities += 1;
        // Opportunity `ms` falls in (0, period]; the window holding it is its time just before.
        let w = (ms.saturating_sub(1) / WINDOW_MS) as usize;
        if counts.len() <= w {
            counts.resize(w + 1, 0);
        }
        counts[w] += 1;
    }
    let Some(period) = last else {
        return Err(err(0, "no delivery opportunities"));
    };
    if period == 0 {
        return Err(err(
            0,
            "the last time is 0 ms: the trace loops at its last time, so it must be later",
        ));
    }
    Ok((counts, period, opportunities))
}

/// (start in ns, bits per second) of each window that delivers, and of the gap after it,
/// which the window's last packet is owed across.
fn rate_steps(counts: &[u64], period_ns: u64) -> Vec<(u64, u64)> {
    let mut steps: Vec<(u64, u64)> = Vec::new();
    // The empty windows at the start are owed by the period's last packet, across the loop.
    let lead = counts.iter().take_while(|n| **n == 0).count() as u64 * WINDOW_MS * MS;
    for (w, &n) in counts.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let start = w as u64 * WINDOW_MS * MS;
        let end = (start + WINDOW_MS * MS).min(period_ns);
        let gap_end = counts[w + 1..]
            .iter()
            .position(|n| *n > 0)
            .map_or(period_ns, |i| (w + 1 + i) as u64 * WINDOW_MS * MS);
        let gap = gap_end - end + if gap_end == period_ns { lead } else { 0 };
        let len = end - start;
        steps.push((start, bits_over(n, len)));
        if gap > 0 {
            let slot = len / n;
            steps.push((end - slot, bits_over(1, slot + gap)));
        }
    }
    if lead > 0 {
        let last = steps.last().map_or(MIN_RATE_BPS, |(_, r)| *r);
        steps.insert(0, (0, last));
    }
    steps
}

/// The steps with a later one at the same time replacing the earlier, and a rate that does
/// not change dropped; none below the slowest rate a link takes.
fn merged(steps: Vec<(u64, u64)>) -> Vec<(Duration, Rate)> {
    let mut merged: Vec<(Duration, Rate)> = Vec::new();
    for (at, bps) in steps {
        let rate = Rate(bps.max(MIN_RATE_BPS));
        if merged
            .last()
            .is_some_and(|(a, _)| a.as_nanos() == u128::from(at))
        {
            merged.pop();
        }
        if merged.last().is_none_or(|(_, r)| *r != rate) {
            merged.push((Duration::from_nanos(at), rate));
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_packet_a_millisecond_is_twelve_megabits() {
        let text: String = (1..=1000).map(|t| format!("{t}\n")).collect();
        let d = parse_mahimahi(&text).unwrap();
        assert_eq!(d.period, ms(1000));
        assert_eq!(d.steps, vec![(ms(0), Rate(12_000_000))]);
        assert_eq!(d.mean(), Rate(12_000_000));
    }

    #[test]
    fn bursts_and_gaps_keep_their_windows() {
        // 100 ms of two packets a millisecond, then 100 ms of nothing; period 200 ms.
        let mut text = String::from("# on, then off\n\n");
        for t in 1..=100 {
            text.push_str(&format!("{t}\n{t}\n"));
        }
        text.push_str("200\n");
        let d = parse_mahimahi(&text).unwrap();
        assert_eq!(d.period, ms(200));
        assert_eq!(d.opportunities, 201);
        // The gap's 90 ms are owed by the on-period's last packet: its 0.5 ms slot and the
        // gap carry one packet.
        assert_eq!(
            d.steps,
            vec![
                (ms(0), Rate(24_000_000)),
                (Duration::from_micros(99_500), Rate(132_597)),
                (ms(190), Rate(1_200_000)),
            ]
        );
        assert_eq!(d.peak(), Rate(24_000_000));
        assert_eq!(d.mean(), Rate(12_060_000));
    }

    #[test]
    fn bits_between_follow_the_loop() {
        let mut text = String::new();
        for t in 1..=100 {
            text.push_str(&format!("{t}\n{t}\n"));
        }
        text.push_str("200\n");
        let d = parse_mahimahi(&text).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1.0;
        // A whole period carries every opportunity, wherever it starts.
        for from in [0, 37, 150, 1_990] {
            let bits = d.bits_between(ms(from), ms(from + 200));
            assert!(close(bits, 201.0 * 12_000.0), "{from}: {bits}");
        }
        // Inside the on-period: 24 Mbit/s; across two loops' on-periods too.
        assert!(close(d.bits_between(ms(10), ms(60)), 24e6 * 0.05));
        assert!(close(d.bits_between(ms(410), ms(460)), 24e6 * 0.05));
        assert!(close(d.bits_between(ms(5), ms(5)), 0.0));
    }

    #[test]
    fn a_short_last_window_is_rated_over_its_own_length() {
        let d = parse_mahimahi("5\n15\n").unwrap();
        assert_eq!(
            d.steps,
            vec![(ms(0), Rate(1_200_000)), (ms(10), Rate(2_400_000))]
        );
    }

    /// Empty windows at the start are owed by the period's last packet, across the loop.
    #[test]
    fn a_leading_gap_is_owed_by_the_last_packet() {
        let d = parse_mahimahi("25\n30\n").unwrap();
        assert_eq!(
            d.steps,
            vec![
                (ms(0), Rate(480_000)),
                (ms(20), Rate(2_400_000)),
                (ms(25), Rate(480_000)),
            ]
        );
    }

    /// Every step lets at least one packet through its length, so that a packet let out in
    /// it never owes beyond the next opportunity.
    #[test]
    fn no_step_is_shorter_than_one_packet_at_its_rate() {
        let text = "1\n1\n1\n40\n41\n200\n";
        let d = parse_mahimahi(text).unwrap();
        let period = d.period.as_secs_f64();
        for (i, (at, r)) in d.steps.iter().enumerate() {
            let end = d.steps.get(i + 1).map_or(period, |(n, _)| n.as_secs_f64());
            let bits = r.0 as f64 * (end - at.as_secs_f64());
            assert!(bits >= 11_999.0, "step {i} {:?}: {bits} bits", d.steps);
        }
    }

    #[test]
    fn bad_traces_name_their_line() {
        let e = |t: &str| parse_mahimahi(t).unwrap_err().to_string();
        assert_eq!(e(""), "rate trace line 0: no delivery opportunities");
        assert_eq!(
            e("# nothing\n\n"),
            "rate trace line 0: no delivery opportunities"
        );
        assert!(e("0\n0\n").contains("must be later"));
        assert_eq!(
            e("5\n4\n"),
            "rate trace line 2: 4 ms comes after 5 ms: times must not decrease"
        );
        assert!(e("1\n2.5\n").starts_with("rate trace line 2: `2.5` is not a whole number"));
        assert!(e("-3\n").contains("not a whole number"));
        assert!(e("99999999999999999999\n").contains("not a whole number"));
        assert!(e("3600001\n").contains("past the longest period"));
        assert!(e("1 1500\n").contains("not a whole number"));
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_trace_or_an_error(text in ".{0,400}") {
            let _ = parse_mahimahi(&text);
        }

        #[test]
        fn the_steps_carry_the_traces_volume(times in proptest::collection::vec(1u64..5_000, 1..400)) {
            let mut times = times;
            times.sort_unstable();
            let text: String = times.iter().map(|t| format!("{t}\n")).collect();
            let d = parse_mahimahi(&text).unwrap();
            proptest::prop_assert_eq!(d.opportunities, times.len() as u64);
            proptest::prop_assert_eq!(d.steps[0].0, Duration::ZERO);
            // Integrated over the period, the steps deliver the trace's bytes (to rounding
            // and the floor given to empty windows).
            let period = d.period.as_secs_f64();
            let mut bits = 0.0;
            for (i, (at, r)) in d.steps.iter().enumerate() {
                let end = d.steps.get(i + 1).map_or(period, |(n, _)| n.as_secs_f64());
                bits += r.0 as f64 * (end - at.as_secs_f64());
            }
            let want = times.len() as f64 * 12_000.0;
            proptest::prop_assert!(bits >= want - 1.0 * d.steps.len() as f64 - 1.0, "{} < {}", bits, want);
            proptest::prop_assert!(bits <= want + MIN_RATE_BPS as f64 * period + 1.0, "{} > {}", bits, want);
        }
    }
}
