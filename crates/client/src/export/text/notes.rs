//! The notes a run's report gets beside its figures (its client's CPU quota, the split proxy
//! it went through), rendered once for the text summary, the compare table and the HTML page.

use qbench_core::spec::cpulimit::{ClientCpuRecord, Throttling};
use qbench_core::spec::server_cpu::{ServerCpuRecord, Slicer};

use super::numbers::count;

/// Runs of a comparison that something other than the transports limited: the link could not
/// carry them, or their client may have (not a `--client-cpu` quota, which is the experiment);
/// one short phrase for a table row or a heatmap square, `None` when every run is clean.
pub fn limited_runs(r: &qbench_core::report::compare::CompareReport) -> Option<String> {
    let runs = || r.a.runs.iter().chain(&r.b.runs);
    let link = runs()
        .filter(|r| r.link_check.as_ref().is_some_and(|l| !l.carried()))
        .count();
    let client = runs()
        .filter(|r| r.objects.completed > 0)
        .filter(|r| r.client.as_ref().is_some_and(|c| c.saturated.is_some()))
        .filter(|r| !r.cpu_limited())
        .count();
    let total = runs().count();
    let mut out = Vec::new();
    if link > 0 {
        out.push(format!("link short in {link}/{total} runs"));
    }
    if client > 0 {
        out.push(format!("client-limited in {client}/{total} runs"));
    }
    (!out.is_empty()).then(|| out.join(", "))
}

/// `0.25 of a core (cgroup-v1), throttled in 10 of 11 periods, 0.69 s stopped; pinned to 1`,
/// over the runs that recorded one; `None` when none did.
pub fn client_cpu(runs: &[qbench_core::RunReport]) -> Option<String> {
    let records: Vec<&ClientCpuRecord> =
        runs.iter().filter_map(|r| r.client_cpu.as_ref()).collect();
    let first = records.first()?;
    let mut parts = Vec::new();
    let lost = records
        .iter()
        .any(|r| r.fraction.is_some() && r.quota_us.is_none());
    match (first.fraction, first.backend) {
        (Some(f), Some(_)) if lost => parts.push(format!(
            "{f} of a core asked, but the quota was not in force at the end of every run"
        )),
        (Some(f), Some(b)) => {
            let backend = serde_json::to_value(b).ok();
            let backend = backend
                .as_ref()
                .and_then(|v| v.as_str())
                .unwrap_or("cgroup");
            let t = summed(records.iter().filter_map(|r| r.throttling.as_ref()));
            parts.push(format!("{f} of a core ({backend}), {}", throttled(&t)));
        }
        _ => parts.push("no quota".into()),
    }
    if let Some(set) = &first.cpuset {
        parts.push(format!("pinned to CPU {set}"));
    }
    Some(parts.join("; "))
}

fn summed<'a>(records: impl Iterator<Item = &'a Throttling>) -> Throttling {
    records.fold(Throttling::default(), |a, t| Throttling {
        periods: a.periods + t.periods,
        throttled_periods: a.throttled_periods + t.throttled_periods,
        throttled_us: a.throttled_us + t.throttled_us,
    })
}

fn throttled(t: &Throttling) -> String {
    format!(
        "throttled in {} of {} periods, {:.2} s stopped",
        t.throttled_periods,
        t.periods,
        t.throttled_us as f64 / 1e6
    )
}

/// `0.03 of a core in 100ms slices (CFS quota, cgroup-v1), throttled in 21 of 24 periods,
/// 1.00 s stopped` or `... (SCHED_DEADLINE, 1 thread)`, over the runs that recorded one.
pub fn server_cpu(runs: &[qbench_core::RunReport]) -> Option<String> {
    let records: Vec<&ServerCpuRecord> =
        runs.iter().filter_map(|r| r.server_cpu.as_ref()).collect();
    let first = records.first()?;
    let slices = format!(
        "{} of a core in {} slices",
        first.limit.share,
        humantime::format_duration(std::time::Duration::from_micros(first.limit.period_us))
    );
    Some(match first.limit.sched {
        Slicer::Cfs => {
            let backend = serde_json::to_value(first.backend).ok();
            let backend = backend
                .as_ref()
                .and_then(|v| v.as_str())
                .unwrap_or("cgroup");
            let t = summed(records.iter().filter_map(|r| r.throttling.as_ref()));
            format!("{slices} (CFS quota, {backend}), {}", throttled(&t))
        }
        Slicer::Deadline => format!(
            "{slices} (SCHED_DEADLINE, {} µs of each period {})",
            first.quota_us,
            match first.threads {
                1 => "on its one thread".to_string(),
                n => format!("on each of its {n} threads"),
            }
        ),
        Slicer::Steal => {
            let t = summed(records.iter().filter_map(|r| r.throttling.as_ref()));
            format!(
                "{slices} (CPU {} taken by a real-time thread for the rest of each period: {} periods, {:.2} s taken)",
                first.cpu.map_or("?".to_string(), |c| c.to_string()),
                t.periods,
                t.throttled_us as f64 / 1e6
            )
        }
    })
}

/// `caddy 2.6.2: ready in 35 ms, CPU 0.017 s, peak RSS 37.7 MiB, 1 process, ended by
/// SIGTERM; not matched: cc: cubic (quic-go's own ...)`, over the runs a server program
/// served.
pub fn server_program(runs: &[qbench_core::RunReport]) -> Option<String> {
    let recs: Vec<_> = runs
        .iter()
        .filter_map(|r| r.server_program.as_ref())
        .collect();
    let first = recs.first()?;
    let cpu: f64 = recs.iter().map(|r| r.user_s + r.sys_s).sum();
    let ready = recs.iter().map(|r| r.ready_us).max().unwrap_or(0);
    let rss = recs.iter().map(|r| r.max_rss_kib).max().unwrap_or(0);
    let ends: std::collections::BTreeSet<&str> = recs.iter().map(|r| r.ended.as_str()).collect();
    let ends: Vec<&str> = ends.into_iter().collect();
    let name = match &first.version {
        Some(v) if !v.starts_with(&first.name) => format!("{} {v}", first.name),
        Some(v) => v.clone(),
        None => first.name.clone(),
    };
    let mut line = format!(
        "{name}: ready within {:.0} ms, CPU {cpu:.3} s, peak RSS {:.1} MiB, {} process{}, ended {}",
        ready as f64 / 1e3,
        rss as f64 / 1024.0,
        first.processes,
        if first.processes == 1 { "" } else { "es" },
        ends.join(" / "),
    );
    if !first.unmatched.is_empty() {
        let what: Vec<String> = (first.unmatched.iter())
            .map(|u| format!("{} ({})", u.setting, u.instead))
            .collect();
        line.push_str(&format!("; not matched: {}", what.join("; ")));
    }
    Some(line)
}

/// What the split proxy carried over the runs, where they went through one.
pub fn proxy(runs: &[qbench_core::RunReport]) -> Option<String> {
    let recs: Vec<_> = runs.iter().filter_map(|r| r.proxy.as_ref()).collect();
    let first = recs.first()?;
    let sum =
        |f: fn(&qbench_core::report::link::ProxyRun) -> u64| recs.iter().map(|r| f(r)).sum::<u64>();
    let cpu: f64 = recs.iter().map(|r| r.cpu.user_s + r.cpu.sys_s).sum();
    Some(format!(
        "{} upstream: {} requests over {} connections ({} failed), {} bytes down, {} bytes up, {} broken; CPU {:.3} s",
        first.upstream,
        count(sum(|r| r.requests)),
        count(sum(|r| r.connects)),
        count(sum(|r| r.connect_failures)),
        count(sum(|r| r.bytes_down)),
        count(sum(|r| r.bytes_up)),
        count(sum(|r| r.broken)),
        cpu
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use qbench_core::spec::cpulimit::CgroupBackend;
    use qbench_core::spec::server_cpu::ServerCpu;
    use qbench_core::Recorder;

    fn run_with(quota_us: Option<u64>) -> qbench_core::RunReport {
        let mut run =
            Recorder::new(0, 1, std::time::Duration::ZERO).finish(std::time::Duration::ZERO);
        run.client_cpu = Some(ClientCpuRecord {
            fraction: Some(0.2),
            backend: Some(CgroupBackend::CgroupV2),
            cgroup: Some("/sys/fs/cgroup/qb-00000000-cpu".into()),
            quota_us,
            period_us: quota_us.map(|_| 10_000),
            cpuset: None,
            threads: 1,
            throttling: Some(Throttling {
                periods: 10,
                throttled_periods: 4,
                throttled_us: 20_000,
            }),
        });
        run
    }

    #[test]
    fn a_quota_that_vanished_is_neither_described_nor_excused_as_held() {
        let held = run_with(Some(2_000));
        assert!(held.cpu_limited());
        let text = client_cpu(std::slice::from_ref(&held)).unwrap();
        assert_eq!(
            text,
            "0.2 of a core (cgroup-v2), throttled in 4 of 10 periods, 0.02 s stopped"
        );
        let lost = run_with(None);
        assert!(!lost.cpu_limited());
        let text = client_cpu(&[held, lost]).unwrap();
        assert!(text.contains("the quota was not in force"), "{text}");
        assert_eq!(client_cpu(&[]), None);
    }

    #[test]
    fn a_sliced_server_says_whose_slices_and_how_often_they_stopped_it() {
        let mut a = run_with(Some(2_000));
        let mut b = a.clone();
        let limit: ServerCpu = "0.03/100ms".parse().unwrap();
        a.server_cpu = Some(ServerCpuRecord {
            limit,
            cpu: None,
            backend: Some(CgroupBackend::CgroupV1),
            quota_us: 3_000,
            period_us: 100_000,
            threads: 1,
            throttling: a.client_cpu.as_ref().and_then(|c| c.throttling.clone()),
        });
        b.server_cpu = a.server_cpu.clone();
        assert_eq!(
            server_cpu(&[a.clone(), b]).unwrap(),
            "0.03 of a core in 100ms slices (CFS quota, cgroup-v1), throttled in 8 of 20 periods, 0.04 s stopped"
        );
        let rec = a.server_cpu.as_mut().unwrap();
        rec.limit = "deadline:0.03/100ms".parse().unwrap();
        (rec.backend, rec.throttling) = (None, None);
        assert_eq!(
            server_cpu(std::slice::from_ref(&a)).unwrap(),
            "0.03 of a core in 100ms slices (SCHED_DEADLINE, 3000 µs of each period on its one thread)"
        );
        assert_eq!(server_cpu(&[run_with(None)]), None);
    }
}
