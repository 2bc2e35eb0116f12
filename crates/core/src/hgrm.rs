//! HdrHistogram's `.hgrm` percentile distribution, the text HdrHistogram's plotter and
//! HistogramLogAnalyzer read (Java's `outputPercentileDistribution`).

use std::fmt::Write as _;

use crate::histogram::LatencyHistogram;

/// Percentile levels per halving of the distance to 100%, as HdrHistogram's tools default to.
pub const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// `x` (not negative) to `digits` decimals, rounding half up on its shortest decimal form,
/// as Java's Formatter does in HdrHistogram's own output; Rust's `{:.N}` rounds ties to even
/// (0.9997802734375 would end in 437, not 438).
fn fixed(x: f64, digits: usize) -> String {
    if !(x.is_finite() && x >= 0.0) {
        return format!("{x:.digits$}");
    }
    let shortest = format!("{x}");
    let (int, frac) = shortest.split_once('.').unwrap_or((&shortest, ""));
    let mut d: Vec<u8> = int
        .bytes()
        .chain(frac.bytes().chain(std::iter::repeat(b'0')).take(digits))
        .map(|b| b - b'0')
        .collect();
    if frac.as_bytes().get(digits).is_some_and(|&b| b >= b'5') {
        let mut i = d.len();
        loop {
            if i == 0 {
                d.insert(0, 1);
                break;
            }
            i -= 1;
            if d[i] == 9 {
                d[i] = 0;
            } else {
                d[i] += 1;
                break;
            }
        }
    }
    let text: String = d.iter().map(|v| char::from(b'0' + v)).collect();
    let (int, frac) = text.split_at(text.len() - digits);
    if digits == 0 {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    }
}

/// Percentile levels reported past `level` (in percent): ticks per half distance, doubled
/// each time the distance to 100% halves.
fn step(level: f64) -> f64 {
    let halvings = ((100.0 / (100.0 - level)).ln() / 2f64.ln()) as u32;
    100.0 / (f64::from(TICKS_PER_HALF_DISTANCE) * 2f64.powi(halvings as i32 + 1))
}

/// (value, percentile level, count at or below) rows as HdrHistogram's percentile iterator
/// yields them: levels in percent, so that 10 + 10 + 10 is exactly 30 (in quantiles, 0.1 +
/// 0.1 + 0.1 is not 0.3, and a bucket that reaches 30% exactly would be passed over), then one
/// last row at 100%.
fn percentile_rows(h: &LatencyHistogram) -> Vec<(u64, f64, u64)> {
    let inner = h.inner();
    let total = inner.len();
    let buckets: Vec<(u64, u64)> = inner
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
    let mut rows = Vec::new();
    let (mut i, mut count, mut fresh, mut level) = (0, 0u64, true, 0.0);
    while count < total && i < buckets.len() {
        let (value, n) = buckets[i];
        if fresh {
            count += n;
            fresh = false;
        }
        if 100.0 * count as f64 / total as f64 >= level {
            rows.push((value, level, count));
            level += step(level);
        } else {
            i += 1;
            fresh = true;
        }
    }
    if let Some(&(value, _)) = buckets.get(i) {
        rows.push((value, 100.0, total));
    }
    rows
}

impl LatencyHistogram {
    /// The distribution with values divided by `scale` (1000: microseconds as milliseconds).
    pub fn hgrm(&self, scale: f64) -> String {
        let h = self.inner();
        let digits = usize::from(h.sigfig());
        let mut out = format!(
            "{:>12} {:>14} {:>10} {:>14}\n\n",
            "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
        );
        for (value, level, count) in percentile_rows(self) {
            let value = value as f64 / scale;
            let q = level / 100.0;
            let (value, q12) = (fixed(value, digits), fixed(q, 12));
            if level != 100.0 {
                let inverse = fixed(1.0 / (1.0 - q), 2);
                let _ = writeln!(out, "{value:>12} {q12:>2} {count:10} {inverse:>14}");
            } else {
                let _ = writeln!(out, "{value:>12} {q12:>2} {count:10}");
            }
        }
        let (mean, sd, max) = if h.is_empty() {
            (0.0, 0.0, 0.0)
        } else {
            (h.mean() / scale, h.stdev() / scale, h.max() as f64 / scale)
        };
        let sub_buckets = (2 * 10u64.pow(u32::from(h.sigfig()))).next_power_of_two();
        let _ = writeln!(
            out,
            "#[Mean    = {:>12}, StdDeviation   = {:>12}]",
            fixed(mean, digits),
            fixed(sd, digits)
        );
        let _ = writeln!(
            out,
            "#[Max     = {:>12}, Total count    = {:12}]",
            fixed(max, digits),
            h.len()
        );
        let _ = writeln!(
            out,
            "#[Buckets = {:12}, SubBuckets     = {sub_buckets:12}]",
            h.buckets()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn distribution_ends_at_the_maximum_with_every_sample() {
        let mut h = LatencyHistogram::new();
        for us in 1..=10_000u64 {
            h.record(Duration::from_micros(us));
        }
        let text = h.hgrm(1000.0);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"));
        let last = rows.last().unwrap();
        assert_eq!(last.len(), 3, "the 100% line has no 1/(1-p)");
        assert_eq!(last[1], "1.000000000000");
        assert_eq!(last[2], "10000");
        assert_eq!(
            last[0], "10.007",
            "10,000 us in ms, at 3 digits' resolution"
        );
        let values: Vec<f64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
        let counts: Vec<u64> = rows.iter().map(|r| r[2].parse().unwrap()).collect();
        assert!(values.windows(2).all(|w| w[0] <= w[1]));
        assert!(counts.windows(2).all(|w| w[0] <= w[1]));
        assert!(text.contains("#[Max     =       10.007, Total count    =        10000]"));
        assert!(text.contains("SubBuckets     =         2048]"));
    }

    #[test]
    fn ties_round_up_as_in_hdrhistograms_own_output() {
        assert_eq!(fixed(0.9997802734375, 12), "0.999780273438");
        assert_eq!(fixed(2.125, 2), "2.13");
        assert_eq!(fixed(9.9995, 3), "10.000");
        assert_eq!(fixed(0.0, 3), "0.000");
        assert_eq!(fixed(1.0, 12), "1.000000000000");
        assert_eq!(fixed(4551.111111, 2), "4551.11");
        assert_eq!(fixed(12.0, 0), "12");
    }

    proptest::proptest! {
        /// Within half a unit of the last digit of the value, whatever the value.
        #[test]
        fn fixed_is_the_value_rounded(x in 0f64..1e9, digits in 0usize..13) {
            let text = fixed(x, digits);
            let back: f64 = text.parse().unwrap();
            let unit = 10f64.powi(-(digits as i32));
            proptest::prop_assert!((back - x).abs() <= unit / 2.0 + x * 1e-15, "{x} {digits} {text}");
        }
    }

    #[test]
    fn an_empty_histogram_has_a_footer_alone() {
        let text = LatencyHistogram::new().hgrm(1000.0);
        assert_eq!(text.lines().filter(|l| !l.is_empty()).count(), 4);
        assert!(text.contains("Total count    =            0]"));
    }
}
