//! h2load's `--log-file` (one line per request: start on the wall clock in µs, status, µs to
//! the response's end) and the summary it prints.

/// One request of h2load's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine {
    pub start_unix_us: u64,
    pub status: u16,
    pub elapsed_us: u64,
}

/// What the summary says.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    pub succeeded: u64,
    pub failed: u64,
    pub errored: u64,
    pub timeout: u64,
    /// Body (DATA) bytes of every response.
    pub data_bytes: u64,
    /// Mean of "time for connect", when any client connected.
    pub connect_mean_us: Option<u64>,
    /// Clients that connected.
    pub connections_ok: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("h2load's log, line {line}: expected START_US<TAB>STATUS<TAB>ELAPSED_US, got `{text}`")]
pub struct LogError {
    pub line: usize,
    pub text: String,
}

pub fn parse_log(text: &str) -> Result<Vec<LogLine>, LogError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let bad = || LogError {
            line: i + 1,
            text: raw.chars().take(80).collect(),
        };
        let mut f = raw.split('\t');
        let mut num = || f.next().and_then(|x| x.trim().parse::<u64>().ok());
        let (Some(start), Some(status), Some(elapsed)) = (num(), num(), num()) else {
            return Err(bad());
        };
        let status = u16::try_from(status).map_err(|_| bad())?;
        out.push(LogLine {
            start_unix_us: start,
            status,
            elapsed_us: elapsed,
        });
    }
    Ok(out)
}

/// `397us`, `2.99ms`, `1.5s` in µs.
fn duration_us(s: &str) -> Option<u64> {
    let (n, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e3)
    } else {
        (s.strip_suffix('s')?, 1e6)
    };
    let v: f64 = n.parse().ok()?;
    (v.is_finite() && (0.0..1e12).contains(&v)).then(|| (v * scale).round() as u64)
}

/// The number before `word` in a `requests:` style line (`3 succeeded`).
fn count_before(line: &str, word: &str) -> Option<u64> {
    line.split(',').map(str::trim).find_map(|part| {
        part.strip_suffix(word)?
            .trim()
            .rsplit(' ')
            .next()?
            .parse()
            .ok()
    })
}

/// `None` when the output has no summary (h2load died before it).
pub fn parse_summary(text: &str) -> Option<Summary> {
    let mut s = Summary::default();
    let mut seen = false;
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("requests:") {
            seen = true;
            s.succeeded = count_before(rest, "succeeded").unwrap_or(0);
            s.failed = count_before(rest, "failed").unwrap_or(0);
            s.errored = count_before(rest, "errored").unwrap_or(0);
            s.timeout = count_before(rest, "timeout").unwrap_or(0);
        } else if let Some(rest) = l.strip_prefix("traffic:") {
            // `..., 196.29KB (201000) data`: the exact figure is in brackets.
            s.data_bytes = rest
                .rsplit(',')
                .next()
                .and_then(|d| d.split('(').nth(1)?.split(')').next()?.parse().ok())
                .unwrap_or(0);
        } else if let Some(rest) = l.strip_prefix("time for connect:") {
            let cols: Vec<&str> = rest.split_whitespace().collect();
            s.connect_mean_us = cols.get(2).and_then(|c| duration_us(c));
            s.connections_ok = u64::from(s.connect_mean_us.is_some_and(|m| m > 0));
        }
    }
    seen.then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// h2load 1.52's output for three requests on one client.
    const OUT: &str = "starting benchmark...
finished in 4.49ms, 668.30 req/s, 42.76MB/s
requests: 3 total, 3 started, 3 done, 3 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 3 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 196.57KB (201284) total, 76B (76) headers (space savings 78.47%), 196.29KB (201000) data
                     min         max         mean         sd        +/- sd
time for request:      397us       647us       496us       132us    66.67%
time for connect:     2.99ms      2.99ms      2.99ms         0us   100.00%
time to 1st byte:     3.68ms      3.68ms      3.68ms         0us   100.00%
";

    #[test]
    fn reads_summary_and_log() {
        let s = parse_summary(OUT).unwrap();
        assert_eq!((s.succeeded, s.failed, s.data_bytes), (3, 0, 201_000));
        assert_eq!(s.connect_mean_us, Some(2990));
        let log = parse_log("1795819690171108\t200\t397\n1795819690171106\t200\t444\n").unwrap();
        assert_eq!(log[1].start_unix_us, 1_795_819_690_171_106);
        assert_eq!((log[0].status, log[0].elapsed_us), (200, 397));
        assert!(parse_log("12\tx\t3").is_err());
        assert!(parse_log("12\t70000\t3").is_err());
        assert_eq!(parse_summary("starting benchmark...\n"), None);
    }

    proptest! {
        #[test]
        fn any_output_is_a_value_or_an_error(text in "[a-z0-9:,.()% \t\n]{0,300}") {
            let _ = parse_summary(&text);
            let _ = parse_log(&text);
        }
    }
}
