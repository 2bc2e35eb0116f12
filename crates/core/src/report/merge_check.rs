//! What `merge` checks of its inputs before it adds anything: a shard's report is a file
//! anyone can edit, so every figure that is added must add without wrapping, every time
//! must be one a run can have, every histogram must decode within its bounds, and a shard
//! must be one of the workload's. Each error names the file and the field.

use crate::histogram::HistogramExport;
use crate::report::load::LoadReport;
use crate::report::{Report, RunReport};

/// The longest time a run's figures may span: a month (`load::MAX_DURATION`) and a day of
/// connecting and draining.
pub const MAX_RUN_US: u64 = 31 * 24 * 3600 * 1_000_000;
/// Shards' wall-clock starts must lie within this of each other (a month): further apart
/// they are not one workload, and offsets on one time line stay far from overflow.
pub const MAX_START_SPREAD_US: u64 = 30 * 24 * 3600 * 1_000_000;

/// A figure of one input that cannot be merged.
#[derive(Debug, thiserror::Error)]
#[error("{file}: `{field}` {why}")]
pub struct InputError {
    pub file: String,
    pub field: String,
    pub why: String,
}

fn err(file: &str, field: impl Into<String>, why: impl Into<String>) -> InputError {
    InputError {
        file: file.to_string(),
        field: field.into(),
        why: why.into(),
    }
}

/// A time in microseconds within one run's span.
fn time(file: &str, field: &str, v: Option<u64>) -> Result<(), InputError> {
    match v {
        Some(us) if us > MAX_RUN_US => Err(err(
            file,
            field,
            format!("is {us} us, more than a run can last ({MAX_RUN_US} us)"),
        )),
        _ => Ok(()),
    }
}

fn histogram(file: &str, field: &str, h: Option<&HistogramExport>) -> Result<(), InputError> {
    match h.map(HistogramExport::histogram) {
        Some(Err(e)) => Err(err(file, field, e.to_string())),
        _ => Ok(()),
    }
}

fn load(file: &str, at: &str, l: &LoadReport) -> Result<(), InputError> {
    time(file, &format!("{at}.window_us"), Some(l.window_us))?;
    time(
        file,
        &format!("{at}.window_start_us"),
        Some(l.window_start_us),
    )?;
    histogram(file, &format!("{at}.lag"), l.lag.as_ref())?;
    histogram(file, &format!("{at}.client_lag"), l.client_lag.as_ref())?;
    histogram(file, &format!("{at}.service_time"), l.service_time.as_ref())?;
    if l.dropped_late > l.dropped {
        return Err(err(
            file,
            format!("{at}.dropped_late"),
            "is more than `dropped`",
        ));
    }
    if l.client_late > l.late {
        return Err(err(
            file,
            format!("{at}.client_late"),
            "is more than `late`",
        ));
    }
    Ok(())
}

/// One run of one shard: its times, its histograms and its own counts.
fn run(file: &str, k: usize, r: &RunReport) -> Result<(), InputError> {
    let at = format!("runs[{k}]");
    for (field, v) in [
        ("duration_us", Some(r.duration_us)),
        ("first_request_us", r.first_request_us),
        ("last_byte_us", r.last_byte_us),
        ("handshake_us", r.handshake_us),
        ("plt_us", r.plt_us),
    ] {
        time(file, &format!("{at}.{field}"), v)?;
    }
    for (i, c) in r.connections.iter().enumerate() {
        time(
            file,
            &format!("{at}.connections[{i}].started_us"),
            Some(c.started_us),
        )?;
    }
    let o = &r.objects;
    if o.completed
        .checked_add(o.failed)
        .is_none_or(|n| n > o.requested)
    {
        return Err(err(
            file,
            format!("{at}.objects"),
            format!(
                "says {} completed and {} failed of {} requested",
                o.completed, o.failed, o.requested
            ),
        ));
    }
    histogram(
        file,
        &format!("{at}.object_latency"),
        Some(&r.object_latency),
    )?;
    histogram(file, &format!("{at}.ttfb"), Some(&r.ttfb))?;
    if let Some(l) = &r.load {
        load(file, &format!("{at}.load"), l)?;
    }
    for (j, i) in r.intervals.iter().enumerate() {
        let iat = format!("{at}.intervals[{j}]");
        time(file, &format!("{iat}.start_us"), Some(i.start_us))?;
        time(file, &format!("{iat}.end_us"), Some(i.end_us))?;
        histogram(file, &format!("{iat}.latency"), Some(&i.latency))?;
    }
    if let Some(c) = &r.client {
        histogram(
            file,
            &format!("{at}.client.runtime_lag"),
            Some(&c.runtime_lag),
        )?;
    }
    Ok(())
}

/// Adds `v` to the running sum of `field`, or says which file made it wrap.
fn add(sum: &mut u64, v: u64, file: &str, field: &str) -> Result<(), InputError> {
    *sum = sum
        .checked_add(v)
        .ok_or_else(|| err(file, field, "makes the shards' sum exceed 2^64 - 1"))?;
    Ok(())
}

/// Every figure merge adds, added here first with checks, run by run.
fn sums(inputs: &[(&str, &Report)]) -> Result<(), InputError> {
    let most = inputs.iter().map(|(_, r)| r.runs.len()).max().unwrap_or(0);
    for k in 0..most {
        let mut s = [0u64; 13];
        let mut errors = std::collections::BTreeMap::new();
        let mut intervals: Vec<[u64; 5]> = Vec::new();
        for (file, r) in inputs {
            let Some(run) = r.runs.get(k) else { continue };
            let at = |f: &str| format!("runs[{k}].{f}");
            let o = &run.objects;
            let l = run.load.as_ref();
            for (i, (field, v)) in [
                ("payload_bytes", run.payload_bytes),
                ("objects.requested", o.requested),
                ("objects.completed", o.completed),
                ("objects.failed", o.failed),
                ("objects.not_started", o.not_started),
                ("objects.retried", o.retried),
                ("load.sent", l.map_or(0, |l| l.sent)),
                ("load.warmup_requests", l.map_or(0, |l| l.warmup_requests)),
                ("load.late", l.map_or(0, |l| l.late)),
                ("load.dropped", l.map_or(0, |l| l.dropped)),
                ("load.dropped_late", l.map_or(0, |l| l.dropped_late)),
                (
                    "errors",
                    run.errors
                        .0
                        .values()
                        .try_fold(0u64, |a, v| a.checked_add(*v))
                        .unwrap_or(u64::MAX),
                ),
                ("connections", run.connections.len() as u64),
            ]
            .into_iter()
            .enumerate()
            {
                add(&mut s[i], v, file, &at(field))?;
            }
            for (kind, n) in &run.errors.0 {
                add(
                    errors.entry(*kind).or_default(),
                    *n,
                    file,
                    &at(&format!("errors.{kind}")),
                )?;
            }
            for (j, i) in run.intervals.iter().enumerate() {
                if intervals.len() <= j {
                    intervals.push([0; 5]);
                }
                let iat = |f: &str| at(&format!("intervals[{j}].{f}"));
                for (x, (field, v)) in [
                    ("completed", i.completed),
                    ("failed", i.failed),
                    ("dropped", i.dropped),
                    ("payload_bytes", i.payload_bytes),
                    ("in_flight", i.in_flight),
                ]
                .into_iter()
                .enumerate()
                {
                    add(&mut intervals[j][x], v, file, &iat(field))?;
                }
            }
            // A fixed workload: the shards together fetch its objects, no more.
            let whole = r.config.total_objects;
            if r.config.spec.load.is_none() && s[1] > whole {
                return Err(err(
                    file,
                    at("objects.requested"),
                    format!(
                        "brings the shards' requests to {}, more than the workload's {whole} objects",
                        s[1]
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Runs `k` of the shards are laid on one time line by their wall-clock starts: they must lie
/// within `MAX_START_SPREAD_US` of each other.
fn spread(inputs: &[(String, Report)]) -> Result<(), InputError> {
    let most = inputs.iter().map(|(_, r)| r.runs.len()).max().unwrap_or(0);
    for k in 0..most {
        let starts: Vec<(u64, &str)> = inputs
            .iter()
            .filter_map(|(f, r)| Some((r.runs.get(k)?.started_unix_us?, f.as_str())))
            .collect();
        let (Some(lo), Some(hi)) = (starts.iter().min(), starts.iter().max()) else {
            continue;
        };
        if hi.0 - lo.0 > MAX_START_SPREAD_US {
            return Err(err(
                hi.1,
                format!("runs[{k}].started_unix_us"),
                format!(
                    "is {} s after {}'s: not one workload's shards",
                    (hi.0 - lo.0) / 1_000_000,
                    lo.1
                ),
            ));
        }
    }
    Ok(())
}

/// Checks every input before anything is added: the shard's place, every run's figures, and
/// every sum merge will take.
pub fn check(inputs: &[(String, Report)]) -> Result<(), InputError> {
    for (file, r) in inputs {
        if let Some(s) = r.config.spec.shard {
            if s.index >= s.count {
                return Err(err(
                    file,
                    "config.shard.index",
                    format!(
                        "is {} of {}: shards are numbered 0 to {}",
                        s.index,
                        s.count,
                        s.count.saturating_sub(1)
                    ),
                ));
            }
        }
        for (k, run_report) in r.runs.iter().enumerate() {
            run(file, k, run_report)?;
        }
    }
    spread(inputs)?;
    let all: Vec<(&str, &Report)> = inputs.iter().map(|(f, r)| (f.as_str(), r)).collect();
    sums(&all)
}
