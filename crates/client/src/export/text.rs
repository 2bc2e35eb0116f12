//! The readable summary of a run report.

use qbench_core::{HistogramExport, Rate, Report, Stats};

fn dur_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.0} us")
    }
}

fn stat_line(s: &Stats, fmt: impl Fn(f64) -> String) -> String {
    match (s.median, s.n) {
        (None, _) => "-".into(),
        (Some(m), 1) => fmt(m),
        (Some(m), n) => format!(
            "median {}  mean {}  sd {}  (n={n})",
            fmt(m),
            fmt(s.mean.unwrap_or(m)),
            s.sd.map_or("-".into(), &fmt),
        ),
    }
}

fn hist_line(h: &HistogramExport) -> String {
    let s = &h.summary;
    let f = |v: Option<u64>| v.map_or("-".into(), |v| dur_us(v as f64));
    format!(
        "p50 {}  p90 {}  p99 {}  max {}  (n={})",
        f(s.p50_us),
        f(s.p90_us),
        f(s.p99_us),
        f(s.max_us),
        s.count
    )
}

/// The most requests any connection had on the wire, and the least the server allowed.
fn streams_line(report: &Report) -> Option<String> {
    let conns = || report.runs.iter().flat_map(|r| &r.connections);
    let peak = conns().map(|c| c.peak_streams).max()?;
    let allowed = conns().filter_map(|c| c.server_max_streams).min();
    Some(match allowed {
        Some(a) => format!("at most {peak} on the wire per connection; the server allows {a}"),
        None => format!("at most {peak} on the wire per connection"),
    })
}

/// The readable summary: one figure per line, medians over runs.
pub fn summary(report: &Report, headline: &str) -> String {
    let s = &report.summary;
    let mut out = format!("{headline}\n");
    let mut line = |k: &str, v: String| out.push_str(&format!("  {k:<15}{v}\n"));
    line("handshake", stat_line(&s.handshake_us, dur_us));
    line("PLT", stat_line(&s.plt_us, dur_us));
    line(
        "goodput",
        stat_line(&s.goodput_bps, |b| Rate(b.round() as u64).to_string()),
    );
    line(
        "objects/s",
        stat_line(&s.objects_per_s, |v| format!("{v:.0}")),
    );
    let requested: u64 = report.runs.iter().map(|r| r.objects.requested).sum();
    line(
        "objects",
        format!(
            "{}/{} ok, {} payload bytes, {}/{} runs complete",
            s.objects_completed, requested, s.payload_bytes, s.complete_runs, s.runs
        ),
    );
    if let Some(v) = streams_line(report) {
        line("streams", v);
    }
    line("latency", hist_line(&s.object_latency));
    line("TTFB", hist_line(&s.ttfb));
    let cpu: Vec<_> = report.runs.iter().filter_map(|r| r.cpu.as_ref()).collect();
    if !cpu.is_empty() {
        let client: f64 = cpu.iter().map(|c| c.client.total_s()).sum();
        let server: Option<f64> = cpu
            .iter()
            .map(|c| c.server.map(|s| s.total_s()))
            .sum::<Option<f64>>();
        let total = client + server.unwrap_or(0.0);
        let per = if total > 0.0 {
            let mb = s.payload_bytes as f64 / total / 1e6;
            format!("; {mb:.1} MB payload per CPU-second")
        } else {
            String::new()
        };
        line(
            "CPU",
            format!(
                "client {client:.3} s{}{per}",
                server.map_or(String::new(), |v| format!(", server {v:.3} s"))
            ),
        );
    }
    line("errors", s.errors.to_string());
    if report.config.insecure {
        line(
            "WARNING",
            "--insecure: the server certificate was NOT verified".into(),
        );
    }
    out
}
