//! The readable summary of a run report.

use qbench_core::report::clocks::{goodput_beyond_link, side_words, WhoseClock};
use qbench_core::report::load::{IntervalRecord, LoadMode, LoadSummary};
use qbench_core::stats::noise::NoiseCause;
use qbench_core::stats::saturation::past_capacity;
use qbench_core::{HistogramExport, Rate, Report, Stats};
use std::time::Duration;

use super::link::{calibration_line, link_line};
use super::numbers::{count, rate};

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
        count(s.count)
    )
}

/// One live interval: `[run 0   2.0-3.0 s]  20,012 req/s ...`, of intervals `every` long.
///
/// A run rarely ends on a tick, so its last interval can be a sliver (the in-flight requests
/// draining after the last tick). A held load's ticker skips a tick that would leave one; any
/// that is still shorter than a tenth of `every` is printed as what completed in it, without
/// per-second rates, which over a few milliseconds would be noise.
pub fn interval_line(run: u32, r: &IntervalRecord, every: Duration) -> String {
    let secs = r.seconds();
    // `IntervalRecord::warmup` is set only when some of its requests belong to a warm-up,
    // which every figure of the run leaves out.
    let warm = if r.warmup {
        "  (warm-up requests in it are left out of the totals)"
    } else {
        ""
    };
    if secs < every.as_secs_f64() / 10.0 {
        return format!(
            "[run {run} {:>6.1} s, last {}] {} completed  errors {}  dropped {}  in flight {}{warm}",
            r.end_us as f64 / 1e6,
            dur_us(r.end_us.saturating_sub(r.start_us) as f64),
            count(r.completed),
            count(r.failed),
            count(r.dropped),
            count(r.in_flight),
        );
    }
    let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let bits = (per_s(r.payload_bytes) * 8.0).round() as u64;
    let s = &r.latency.summary;
    let f = |v: Option<u64>| v.map_or("-".into(), |v| dur_us(v as f64));
    format!(
        "[run {run} {:>6.1}-{:<6.1}s] {:>8} req/s  {:>12}  p50 {:>9}  p99 {:>9}  errors {}  dropped {}  in flight {}{warm}",
        r.start_us as f64 / 1e6,
        r.end_us as f64 / 1e6,
        rate(per_s(r.completed)),
        Rate(bits).to_string(),
        f(s.p50_us),
        f(s.p99_us),
        count(r.failed),
        count(r.dropped),
        count(r.in_flight),
    )
}

/// The held load's lines of the summary.
fn load_lines(
    l: &LoadSummary,
    (mode, target): (LoadMode, Option<f64>),
    (warmup_requests, due, runs): (u64, u64, u64),
    line: &mut dyn FnMut(&str, String),
) {
    let rate = |v: f64| format!("{}/s", rate(v));
    match (mode, target) {
        (LoadMode::Open, Some(t)) => line(
            "rate",
            format!(
                "target {t:.0}/s, sent {}, completed {}",
                stat_line(&l.achieved_rate, rate),
                stat_line(&l.completed_rate, rate)
            ),
        ),
        _ => line(
            "rate",
            format!("completed {}", stat_line(&l.completed_rate, rate)),
        ),
    }
    if warmup_requests > 0 {
        line(
            "warm-up",
            format!(
                "{} request(s) left out of every figure",
                count(warmup_requests)
            ),
        );
    }
    if let Some(lag) = &l.lag {
        line(
            "start lag",
            format!(
                "{}; {} late (> 2 ms), {} dropped{}",
                hist_line(lag),
                count(l.late),
                count(l.dropped),
                match (l.dropped_late, past_capacity(l.dropped_late, due, runs)) {
                    (0, _) => String::new(),
                    (n, beyond) => format!(
                        " ({} of them not sendable within {:?} of their time or by the \
                         window's end: {})",
                        count(n),
                        qbench_core::spec::load::MAX_LAG,
                        if beyond {
                            "the client is past its capacity"
                        } else {
                            "too few of what was due to say the client fell behind"
                        }
                    ),
                }
            ),
        );
    }
    if let Some(w) = waited(l) {
        line("waited", w);
    }
    if let Some(service) = &l.service_time {
        line("service time", hist_line(service));
    }
}

/// The part of the start lag after the client took the requests up, when it is more than
/// the 2 ms that make a request late and the client kept to its schedule: the connections
/// held the requests. A client itself late may have held them too, busy elsewhere.
pub(super) fn waited(l: &LoadSummary) -> Option<String> {
    let p99 = |h: Option<&HistogramExport>| h.and_then(|h| h.summary.p99_us);
    let (all, own) = (p99(l.lag.as_ref())?, p99(l.client_lag.as_ref())?);
    let late = qbench_core::spec::load::LATE_AFTER.as_micros() as u64;
    (own <= late && all.saturating_sub(own) > late).then(|| {
        format!(
            "start lag p99 {}, of which the client's own p99 {} ({} taken up late): the rest \
             waited for a stream or the connection (the link's or the server's limit, not \
             the client's)",
            dur_us(all as f64),
            dur_us(own as f64),
            count(l.client_late)
        )
    })
}

/// The busiest client thread over the runs, and a warning for each run the client may have
/// limited.
fn client_lines(report: &Report, line: &mut dyn FnMut(&str, String)) {
    let loads = || report.runs.iter().filter_map(|r| r.client.as_ref());
    let busiest = loads()
        .flat_map(|c| &c.threads)
        .max_by(|a, b| a.busy.total_cmp(&b.busy));
    let lag = loads().filter_map(|c| c.runtime_lag.summary.p99_us).max();
    if let (Some(t), Some(lag)) = (busiest, lag) {
        line(
            "client",
            format!(
                "busiest thread {} {:.0}% busy ({:.0}% waiting for a CPU); runtime lag p99 {}",
                t.name,
                t.busy * 100.0,
                t.waiting * 100.0,
                dur_us(lag as f64)
            ),
        );
    }
    if let Some(cpu) = super::notes::client_cpu(&report.runs) {
        line("client cpu", cpu);
    }
    if let Some(cpu) = super::notes::server_cpu(&report.runs) {
        line("server cpu", cpu);
    }
    if let Some(p) = super::notes::proxy(&report.runs) {
        line("proxy", p);
    }
    if let Some(s) = super::notes::server_program(&report.runs) {
        line("server", s);
    }
    for r in &report.runs {
        // Saturation is judged from completed requests: a run without one had no load.
        let loaded = r.objects.completed > 0;
        if let Some(why) = r
            .client
            .as_ref()
            .and_then(|c| c.saturated.as_ref())
            .filter(|_| loaded)
        {
            match r.cpu_limited() {
                true => line(
                    "note",
                    format!(
                        "run {}'s client was held to its --client-cpu quota: {why}",
                        r.index
                    ),
                ),
                false => line(
                    "WARNING",
                    format!("the client may have limited run {}: {why}", r.index),
                ),
            }
        }
        if let Some(why) = r.link_check.as_ref().and_then(|l| l.why()) {
            line(
                "WARNING",
                format!("the link could not carry run {}: {why}", r.index),
            );
        }
        if let Some(n) = r.noise.as_ref().filter(|n| n.noisy) {
            let mut why: Vec<String> = n.causes.iter().map(ToString::to_string).collect();
            if why.is_empty() {
                why.push(NoiseCause::Steal(n.steal_pct).to_string());
            }
            line(
                "WARNING",
                format!(
                    "run {} was noisy: {} (it measured the neighbours too)",
                    r.index,
                    why.join(", ")
                ),
            );
        }
    }
}

/// The most requests any connection had on the wire, and the least the server allowed. A
/// third-party client's connections do not say how many requests they carried at once: its
/// runs have no such line.
fn streams_line(report: &Report) -> Option<String> {
    let conns = || {
        report
            .runs
            .iter()
            .filter(|r| r.third_party.is_none())
            .flat_map(|r| &r.connections)
    };
    let peak = conns().map(|c| c.peak_streams).max()?;
    let allowed = conns().filter_map(|c| c.server_max_streams).min();
    Some(match allowed {
        Some(a) => format!("at most {peak} on the wire per connection; the server allows {a}"),
        None => format!("at most {peak} on the wire per connection"),
    })
}

/// Connections that closed with requests waiting (the server's request limit, an idle
/// timeout, a reset), and the requests that went again on the ones opened in their place.
fn reopened_line(report: &Report) -> Option<String> {
    let runs = &report.runs;
    let (mut opened, mut failed) = (0, 0);
    for c in runs
        .iter()
        .flat_map(|r| &r.connections)
        .filter(|c| c.reopened)
    {
        match c.error {
            None => opened += 1,
            Some(_) => failed += 1,
        }
    }
    let retried: u64 = runs.iter().map(|r| r.objects.retried).sum();
    let failed = match failed {
        0 => String::new(),
        n => format!(", {n} attempt(s) to open one failed (at most one a second per connection)"),
    };
    (opened > 0 || !failed.is_empty() || retried > 0).then(|| {
        format!(
            "{opened} connection(s) opened in place of closed ones (the server's request \
             limit, a reset, silence past an idle timeout or --timeout){failed}; {} \
             request(s) the server had not processed sent again",
            count(retried)
        )
    })
}

/// What the QUIC stacks did, over every connection of every run: where `--quic` shows.
fn quic_line(report: &Report) -> Option<String> {
    use qbench_core::spec::quic_knobs::QuicStats;
    let mut client: Option<QuicStats> = None;
    let mut server: Option<QuicStats> = None;
    for r in &report.runs {
        for q in r.connections.iter().filter_map(|c| c.quic.as_ref()) {
            client.get_or_insert_with(QuicStats::default).add(q);
        }
        for q in r.telemetry.iter().flatten().filter_map(|t| t.quic.as_ref()) {
            server.get_or_insert_with(QuicStats::default).add(q);
        }
    }
    let c = client?;
    let per = |n: u64, d: u64| match d {
        0 => "-".to_string(),
        d => format!("{:.1}", n as f64 / d as f64),
    };
    let gro = |g: Option<bool>| match g {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    };
    let mut v = format!(
        "client: 1 ACK per {} datagrams received, {} datagrams per send call, GRO {}, MTU {}",
        per(c.rx_datagrams, c.acks_sent),
        per(c.tx_datagrams, c.tx_calls),
        gro(c.gro),
        c.mtu
    );
    if let Some(s) = server {
        v.push_str(&format!(
            "; server: {} datagrams per send call, 1 ACK per {} datagrams received, GRO {}",
            per(s.tx_datagrams, s.tx_calls),
            per(s.rx_datagrams, s.acks_sent),
            gro(s.gro)
        ));
    }
    if c.ack_frequency_sent + c.ack_frequency_received > 0 {
        v.push_str(&format!(
            "; client's ACK_FREQUENCY frames sent {}, received {}",
            c.ack_frequency_sent, c.ack_frequency_received
        ));
    }
    Some(v)
}

/// This copy's part of the whole, and where its index came from.
fn shard_line(sh: &qbench_core::report::ShardRecord, connections: u32) -> String {
    let mut v = format!("{}/{}", sh.index, sh.count);
    if let Some(src) = &sh.source {
        v.push_str(&format!(" (from {src})"));
    }
    v.push_str(&format!(
        ": {} of {connections} connections",
        sh.connections
    ));
    if let Some(n) = sh.requests {
        v.push_str(&format!(", {} requests", count(n)));
    }
    if let Some(r) = sh.rate {
        v.push_str(&format!(", {r:.1}/s"));
    }
    v
}

/// Where this copy started against the `--start-at` barrier, and how far its clock is trusted.
fn start_line(st: &qbench_core::spec::start::StartRecord) -> String {
    format!(
        "{:+.3} ms from the barrier{}; clock {}",
        st.skew_us as f64 / 1e3,
        if st.late {
            " (late: it had passed)"
        } else {
            ""
        },
        st.clock.state.as_deref().unwrap_or("unknown"),
    )
}

/// The objects fetched of those requested, over all runs, and the runs complete.
fn objects_line(report: &Report) -> String {
    let s = &report.summary;
    let requested: u64 = report.runs.iter().map(|r| r.objects.requested).sum();
    format!(
        "{}/{} ok, {} payload bytes, {}/{} runs complete",
        count(s.objects_completed),
        count(requested),
        count(s.payload_bytes),
        s.complete_runs,
        s.runs
    )
}

/// Below this much CPU time, client and server together, the per-payload figures are left out:
/// the kernel may account CPU time by scheduler tick (a few ms each), and a short run's fixed
/// costs (start-up, handshakes, telemetry) weigh as much as its transfer, so scaling a tenth of
/// a second to a GB would scale mostly noise.
pub(crate) const CPU_TO_EXTRAPOLATE_S: f64 = 0.5;

/// CPU time of the client and, where measured, the server, over all runs, and what it bought:
/// payload per CPU-second, CPU per GB, bandwidth per busy core.
fn cpu_line(report: &Report) -> Option<String> {
    let cpu: Vec<_> = report.runs.iter().filter_map(|r| r.cpu.as_ref()).collect();
    if cpu.is_empty() {
        return None;
    }
    let payload = report.summary.payload_bytes;
    let client: f64 = cpu.iter().map(|c| c.client.total_s()).sum();
    let server: Option<f64> = cpu
        .iter()
        .map(|c| c.server.map(|s| s.total_s()))
        .sum::<Option<f64>>();
    let total = client + server.unwrap_or(0.0);
    let per = if payload == 0 || total <= 0.0 {
        String::new()
    } else if total < CPU_TO_EXTRAPOLATE_S {
        format!(
            "; too little CPU to extrapolate per GB (under {CPU_TO_EXTRAPOLATE_S} CPU-s): \
             run longer or larger for per-GB figures"
        )
    } else {
        let gb = payload as f64 / 1e9;
        let mb = payload as f64 / total / 1e6;
        format!(
            "; {mb:.1} MB payload per CPU-second; per GB client {:.2} s{}; {:.2} Gbit/s per busy core",
            client / gb,
            server.map_or(String::new(), |v| format!(", server {:.2} s", v / gb)),
            gb * 8.0 / total
        )
    };
    // Per object only from enough CPU, for the same reason as per GB.
    let objects = report.summary.objects_completed;
    let per_object = match objects > 0 && client >= CPU_TO_EXTRAPOLATE_S {
        true => format!(
            "; client {:.1} µs per object",
            client * 1e6 / objects as f64
        ),
        false => String::new(),
    };
    Some(format!(
        "client {client:.3} s{}{per}{per_object}",
        server.map_or(String::new(), |v| format!(", server {v:.3} s"))
    ))
}

/// Where the CPU went, by thread role over all runs: "client 2 threads 1.20 s (busiest 95%)".
fn threads_line(report: &Report) -> Option<String> {
    let roles = qbench_core::report::spread::RoleCpu::combined(
        report
            .runs
            .iter()
            .filter_map(|r| r.spread.as_ref())
            .flat_map(|s| &s.roles),
    );
    let parts: Vec<String> = roles
        .iter()
        .map(|r| {
            format!(
                "{} {} thread{} {:.2} s (busiest {:.0}%)",
                r.role.name(),
                r.threads,
                if r.threads == 1 { "" } else { "s" },
                r.cpu_s,
                r.busiest * 100.0
            )
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The readable summary: one figure per line, medians over runs.
pub fn summary(report: &Report, headline: &str) -> String {
    let s = &report.summary;
    let mut out = format!("{headline}\n");
    let mut line = |k: &str, v: String| out.push_str(&format!("  {k:<15}{v}\n"));
    if let Some(sh) = &report.shard {
        line("shard", shard_line(sh, report.config.spec.connections));
    }
    if let Some(st) = &report.start {
        line("start", start_line(st));
    }
    if let Some(l) = &report.link {
        line("link", link_line(l.backend));
        if let Some(c) = &l.calibration {
            line("link measured", calibration_line(c));
        }
    }
    // Runs that ended themselves may still be "complete" when a signal or --fail-early
    // stopped the command: the report is not, and says why first.
    if let Some(why) = &report.aborted {
        line("stopped", crate::console::printable(why));
    }
    if s.objects_completed == 0 {
        // Nothing to measure: no table of dashes, and no judgement of the client's load,
        // which only completed requests can give; the error line that follows has the hint.
        line("objects", objects_line(report));
        // Connections that kept closing are the failures' explanation.
        if let Some(v) = reopened_line(report) {
            line("reopened", v);
        }
        line("errors", s.errors.to_string());
        insecure_line(report, &mut line);
        gate_lines(report, &mut line);
        return out;
    }
    line("times", format!("by {}", side_words(&report.runs)));
    line("handshake", stat_line(&s.handshake_us, dur_us));
    line("PLT", stat_line(&s.plt_us, dur_us));
    line(
        "goodput",
        stat_line(&s.goodput_bps, |b| Rate(b.round() as u64).to_string()),
    );
    if let Some(w) = goodput_warning(report) {
        line("WARNING", w);
    }
    line("objects/s", stat_line(&s.objects_per_s, rate));
    line("objects", objects_line(report));
    if let Some(v) = streams_line(report) {
        line("streams", v);
    }
    if let Some(v) = reopened_line(report) {
        line("reopened", v);
    }
    if let Some(v) = quic_line(report) {
        line("quic", v);
    }
    if let Some(v) = super::losses::summary(report) {
        line("losses", v);
    }
    if let Some(v) = super::sockets::summary(report) {
        line("sockets", v);
    }
    if let Some(v) = super::sockets::kernel_drops(report) {
        line("kernel drops", v);
    }
    super::app_text::lines(report, &mut line);
    if let (Some(l), Some(first)) = (&s.load, report.runs.iter().find_map(|r| r.load.as_ref())) {
        let loads = || report.runs.iter().filter_map(|r| r.load.as_ref());
        let warmup: u64 = loads().map(|l| l.warmup_requests).sum();
        let due: u64 = loads().map(|l| l.sent + l.dropped).sum();
        let counts = (warmup, due, loads().count() as u64);
        load_lines(l, (first.mode, first.target_rate), counts, &mut line);
    }
    line("latency", hist_line(&s.object_latency));
    line("TTFB", hist_line(&s.ttfb));
    if let Some(v) = cpu_line(report) {
        line("CPU", v);
    }
    if let Some(v) = threads_line(report) {
        line("CPU by thread", v);
    }
    line("errors", s.errors.to_string());
    client_lines(report, &mut line);
    insecure_line(report, &mut line);
    gate_lines(report, &mut line);
    out
}

/// The fastest run's goodput when it is above what the link lets through.
pub(crate) fn goodput_warning(report: &Report) -> Option<String> {
    let link = report.config.spec.link.as_ref()?;
    let fastest = report
        .runs
        .iter()
        .filter(|r| r.goodput_bps.is_some_and(f64::is_finite))
        .max_by(|a, b| {
            let g = |r: &qbench_core::RunReport| r.goodput_bps.unwrap_or(0.0);
            g(a).total_cmp(&g(b))
        })?;
    let w = goodput_beyond_link(fastest.goodput_bps?, link, WhoseClock::of(fastest))?;
    Some(format!("run {}'s {w}", fastest.index))
}

/// Each `--fail-if` condition: what the report held for it, and FAILED or passed.
fn gate_lines(report: &Report, line: &mut dyn FnMut(&str, String)) {
    for t in &report.thresholds {
        line("fail-if", gate_line(t));
    }
}

/// `p99>50ms: 41.230 ms, passed`.
pub(crate) fn gate_line(t: &qbench_core::report::thresholds::ThresholdOutcome) -> String {
    let seen = t.observed.map_or("no value to check".into(), |v| {
        qbench_core::report::thresholds::shown(v, &t.unit)
    });
    let verdict = if t.failed { "FAILED" } else { "passed" };
    format!("{}: {seen}, {verdict}", t.condition)
}

fn insecure_line(report: &Report, line: &mut dyn FnMut(&str, String)) {
    if report.config.insecure {
        line(
            "WARNING",
            "--insecure: the server certificate was NOT verified".into(),
        );
    }
}
