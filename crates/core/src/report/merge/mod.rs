//! `qbench merge`: the reports of a workload's shards added into the report of the whole.
//! Histograms add exactly (HdrHistogram V2), counters add, and rates are taken over the
//! union of the shards' windows laid on one wall-clock time line.

use std::collections::BTreeMap;

use crate::histogram::{HistogramError, HistogramExport, LatencyHistogram};
use crate::report::load::{IntervalRecord, LoadReport};
pub use crate::report::merge_info::{MergeInfo, ShardEntry};
use crate::report::{Report, ReportMeta, RunCpu, RunReport, ToolInfo};
use crate::stats::saturation::ClientLoad;
use crate::ErrorCounts;

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("{0}: not a shard's report (run qbench with --shard I/N)")]
    NotShard(String),
    #[error("{file}: `{field}` differs from {first}'s; the shards of one workload differ in their index alone")]
    Differs {
        file: String,
        first: String,
        field: String,
    },
    #[error("{file} and {other} are both shard {index}")]
    Duplicate {
        file: String,
        other: String,
        index: u32,
    },
    #[error("{0}")]
    Histogram(#[from] HistogramError),
    #[error("{0}")]
    Input(#[from] crate::report::merge_check::InputError),
}

/// The configuration with the shard index left out, as JSON fields.
fn workload(r: &Report) -> BTreeMap<String, serde_json::Value> {
    let mut c = r.config.clone();
    if let Some(s) = c.spec.shard.as_mut() {
        s.index = 0;
    }
    match serde_json::to_value(&c) {
        Ok(serde_json::Value::Object(m)) => m.into_iter().collect(),
        _ => BTreeMap::new(),
    }
}

/// The first field in which two workloads differ.
fn differing(
    a: &BTreeMap<String, serde_json::Value>,
    b: &BTreeMap<String, serde_json::Value>,
) -> Option<String> {
    a.keys()
        .chain(b.keys())
        .find(|k| a.get(*k) != b.get(*k))
        .cloned()
}

fn add(into: &mut LatencyHistogram, h: &HistogramExport) -> Result<(), HistogramError> {
    into.merge(&h.histogram()?)
}

fn merged(hs: &[&HistogramExport]) -> Result<HistogramExport, HistogramError> {
    let mut all = LatencyHistogram::new();
    for h in hs {
        add(&mut all, h)?;
    }
    Ok(HistogramExport::from(&all))
}

fn merged_opt(hs: &[Option<&HistogramExport>]) -> Result<Option<HistogramExport>, HistogramError> {
    let some: Vec<&HistogramExport> = hs.iter().flatten().copied().collect();
    if some.is_empty() {
        return Ok(None);
    }
    merged(&some).map(Some)
}

/// `n` per second of `us` microseconds; 0 over an empty span.
fn per_s(n: u64, us: u64) -> f64 {
    if us == 0 {
        0.0
    } else {
        n as f64 / (us as f64 / 1e6)
    }
}

/// One run of every shard that has it; `offsets` place each on the earliest one's time line.
struct Parts<'a> {
    runs: Vec<(u32, &'a RunReport)>,
    offsets: Vec<u64>,
}

impl<'a> Parts<'a> {
    fn new(runs: Vec<(u32, &'a RunReport)>) -> Self {
        let starts: Option<Vec<u64>> = runs.iter().map(|(_, r)| r.started_unix_us).collect();
        let offsets = match starts {
            Some(s) => {
                let origin = s.iter().copied().min().unwrap_or(0);
                s.iter().map(|t| t - origin).collect()
            }
            // A report without wall-clock starts cannot be placed: all start together.
            None => vec![0; runs.len()],
        };
        Self { runs, offsets }
    }

    fn each(&self) -> impl Iterator<Item = (u32, &'a RunReport, u64)> + '_ {
        self.runs
            .iter()
            .zip(&self.offsets)
            .map(|((i, r), o)| (*i, *r, *o))
    }

    fn earliest(&self, f: impl Fn(&RunReport) -> Option<u64>) -> Option<u64> {
        self.each()
            .filter_map(|(_, r, o)| f(r).map(|v| o + v))
            .min()
    }

    fn latest(&self, f: impl Fn(&RunReport) -> Option<u64>) -> Option<u64> {
        self.each()
            .filter_map(|(_, r, o)| f(r).map(|v| o + v))
            .max()
    }

    fn sum(&self, f: impl Fn(&RunReport) -> u64) -> u64 {
        self.runs.iter().map(|(_, r)| f(r)).sum()
    }

    fn load(&self, completed: u64) -> Result<Option<LoadReport>, HistogramError> {
        let loads: Vec<(&LoadReport, u64)> = self
            .each()
            .filter_map(|(_, r, o)| r.load.as_ref().map(|l| (l, o)))
            .collect();
        let Some((first, _)) = loads.first() else {
            return Ok(None);
        };
        let start = loads
            .iter()
            .map(|(l, o)| o + l.window_start_us)
            .min()
            .unwrap_or(0);
        let end = loads
            .iter()
            .map(|(l, o)| o + l.window_start_us + l.window_us)
            .max()
            .unwrap_or(0);
        let window = end - start;
        let last = self.latest(|r| r.last_byte_us).unwrap_or(0);
        let sent = loads.iter().map(|(l, _)| l.sent).sum();
        let target: Vec<f64> = loads.iter().filter_map(|(l, _)| l.target_rate).collect();
        Ok(Some(LoadReport {
            mode: first.mode,
            window_us: window,
            window_start_us: start,
            sent,
            warmup_requests: loads.iter().map(|(l, _)| l.warmup_requests).sum(),
            target_rate: (!target.is_empty()).then(|| target.iter().sum()),
            achieved_rate: per_s(sent, window),
            completed_rate: per_s(completed, window.max(last.saturating_sub(start))),
            late: loads.iter().map(|(l, _)| l.late).sum(),
            dropped: loads.iter().map(|(l, _)| l.dropped).sum(),
            dropped_late: loads.iter().map(|(l, _)| l.dropped_late).sum(),
            lag: merged_opt(
                &loads
                    .iter()
                    .map(|(l, _)| l.lag.as_ref())
                    .collect::<Vec<_>>(),
            )?,
            service_time: merged_opt(
                &loads
                    .iter()
                    .map(|(l, _)| l.service_time.as_ref())
                    .collect::<Vec<_>>(),
            )?,
        }))
    }

    /// Interval `j` of every shard added together.
    fn intervals(&self) -> Result<Vec<IntervalRecord>, HistogramError> {
        let n = self
            .runs
            .iter()
            .map(|(_, r)| r.intervals.len())
            .max()
            .unwrap_or(0);
        let mut out = Vec::with_capacity(n);
        for j in 0..n {
            let parts: Vec<&IntervalRecord> = self
                .runs
                .iter()
                .filter_map(|(_, r)| r.intervals.get(j))
                .collect();
            let mut errors = ErrorCounts::default();
            for p in &parts {
                errors.merge(&p.errors);
            }
            let sum = |f: fn(&IntervalRecord) -> u64| parts.iter().map(|p| f(p)).sum();
            out.push(IntervalRecord {
                start_us: parts.iter().map(|p| p.start_us).min().unwrap_or(0),
                end_us: parts.iter().map(|p| p.end_us).max().unwrap_or(0),
                warmup: parts.iter().any(|p| p.warmup),
                completed: sum(|p| p.completed),
                failed: sum(|p| p.failed),
                dropped: sum(|p| p.dropped),
                payload_bytes: sum(|p| p.payload_bytes),
                in_flight: sum(|p| p.in_flight),
                errors,
                latency: merged(&parts.iter().map(|p| &p.latency).collect::<Vec<_>>())?,
            });
        }
        Ok(out)
    }

    fn client(&self) -> Result<Option<ClientLoad>, HistogramError> {
        let loads: Vec<(u32, &ClientLoad)> = self
            .runs
            .iter()
            .filter_map(|(i, r)| r.client.as_ref().map(|c| (*i, c)))
            .collect();
        if loads.is_empty() {
            return Ok(None);
        }
        let why: Vec<String> = loads
            .iter()
            .filter_map(|(i, c)| c.saturated.as_ref().map(|w| format!("shard {i}: {w}")))
            .collect();
        Ok(Some(ClientLoad {
            threads: loads
                .iter()
                .flat_map(|(i, c)| {
                    c.threads.iter().cloned().map(move |mut t| {
                        t.name = format!("shard {i} {}", t.name);
                        t
                    })
                })
                .collect(),
            runtime_lag: merged(
                &loads
                    .iter()
                    .map(|(_, c)| &c.runtime_lag)
                    .collect::<Vec<_>>(),
            )?,
            saturated: (!why.is_empty()).then(|| why.join("; ")),
        }))
    }

    /// `--verify` digests of every shard; a URL whose body differs between shards is a
    /// failure of the whole, named.
    fn digests(&self) -> (Option<BTreeMap<String, String>>, Option<String>) {
        let mut all: Option<BTreeMap<String, String>> = None;
        let mut clash = None;
        for (i, r) in &self.runs {
            for (url, d) in r.digests.iter().flatten() {
                let seen = all.get_or_insert_with(BTreeMap::new);
                match seen.get(url) {
                    Some(other) if other != d => {
                        clash.get_or_insert_with(|| {
                            format!("shard {i}: {url} had another body in an earlier shard")
                        });
                    }
                    Some(_) => {}
                    None => {
                        seen.insert(url.clone(), d.clone());
                    }
                }
            }
        }
        (all, clash)
    }

    fn run(&self, index: u32, all_present: bool) -> Result<RunReport, MergeError> {
        let first_request = self.earliest(|r| r.first_request_us);
        let last_byte = self.latest(|r| r.last_byte_us);
        let payload = self.sum(|r| r.payload_bytes);
        let (digests, clash) = self.digests();
        let complete = all_present && clash.is_none() && self.runs.iter().all(|(_, r)| r.complete);
        let (mut hs, mut n) = (0u64, 0u64);
        for (_, r) in &self.runs {
            let k = r
                .connections
                .iter()
                .filter(|c| c.handshake_us.is_some())
                .count() as u64;
            hs += r.handshake_us.unwrap_or(0) * k;
            n += k;
        }
        let mut errors = ErrorCounts::default();
        let mut connections = Vec::new();
        for (_, r, o) in self.each() {
            errors.merge(&r.errors);
            connections.extend(r.connections.iter().cloned().map(|mut c| {
                c.started_us += o;
                c
            }));
        }
        let cpu = self
            .runs
            .iter()
            .map(|(_, r)| r.cpu.as_ref())
            .collect::<Option<Vec<_>>>();
        let cpu = cpu.map(|c| {
            let client = c
                .iter()
                .fold(crate::CpuTimes::zero_counted(), |a, x| a.plus(&x.client));
            let server = c
                .iter()
                .map(|x| x.server)
                .collect::<Option<Vec<_>>>()
                .map(|s| {
                    s.iter()
                        .fold(crate::CpuTimes::zero_counted(), |a, x| a.plus(x))
                });
            let tcp = |f: fn(&RunCpu) -> Option<crate::SocketCalls>| {
                c.iter()
                    .map(|x| f(x))
                    .collect::<Option<Vec<_>>>()
                    .map(|v| v.iter().fold(Default::default(), |a, x| x.plus(&a)))
            };
            let mut cpu = RunCpu::new(client, server, payload);
            cpu.client_tcp = tcp(|x| x.client_tcp);
            cpu.server_tcp = tcp(|x| x.server_tcp);
            cpu
        });
        let completed = self.sum(|r| r.objects.completed);
        let telemetry: Vec<_> = self
            .runs
            .iter()
            .filter_map(|(_, r)| r.telemetry.clone())
            .flatten()
            .collect();
        let window = first_request.zip(last_byte).filter(|(f, l)| l > f);
        Ok(RunReport {
            index,
            complete,
            duration_us: self.latest(|r| Some(r.duration_us)).unwrap_or(0),
            started_unix_us: self
                .runs
                .iter()
                .filter_map(|(_, r)| r.started_unix_us)
                .min(),
            first_request_us: first_request,
            last_byte_us: last_byte,
            handshake_us: (n > 0).then(|| hs / n),
            plt_us: if complete && self.runs.iter().all(|(_, r)| r.plt_us.is_some()) {
                self.latest(|r| r.plt_us)
            } else {
                None
            },
            goodput_bps: window
                .filter(|_| payload > 0)
                .map(|(f, l)| payload as f64 * 8.0 / ((l - f) as f64 / 1e6)),
            payload_bytes: payload,
            objects: crate::report::ObjectCounts {
                requested: self.sum(|r| r.objects.requested),
                completed,
                failed: self.sum(|r| r.objects.failed),
                not_started: self.sum(|r| r.objects.not_started),
                retried: self.sum(|r| r.objects.retried),
            },
            connections,
            errors,
            first_error: self
                .runs
                .iter()
                .find_map(|(i, r)| r.first_error.as_ref().map(|e| format!("shard {i}: {e}")))
                .or(clash),
            object_latency: merged(
                &self
                    .runs
                    .iter()
                    .map(|(_, r)| &r.object_latency)
                    .collect::<Vec<_>>(),
            )?,
            ttfb: merged(&self.runs.iter().map(|(_, r)| &r.ttfb).collect::<Vec<_>>())?,
            cpu,
            // Each machine's client had its own cgroup: the shards' reports keep theirs, and
            // the merged config says what quota they all ran under.
            client_cpu: None,
            proxy: None,
            digests,
            telemetry: (!telemetry.is_empty()).then_some(telemetry),
            cc_states: None,
            load: self.load(completed)?,
            intervals: self.intervals()?,
            client: self.client()?,
            // A merged run is as noisy as its noisiest shard.
            noise: self
                .runs
                .iter()
                .filter_map(|(_, r)| r.noise.clone())
                .max_by(|a, b| a.steal_pct.total_cmp(&b.steal_pct)),
            // A video session or a page is one client's: never sharded.
            video: None,
            page: None,
        })
    }
}

/// The reports of a workload's shards (each with the file it came from) as the report of
/// the whole. `tool` and `command` say who merged them.
pub fn merge(
    inputs: &[(String, Report)],
    tool: ToolInfo,
    command: Vec<String>,
) -> Result<Report, MergeError> {
    let (first_file, first) = inputs.first().ok_or(MergeError::Empty)?;
    let count = first
        .config
        .spec
        .shard
        .ok_or_else(|| MergeError::NotShard(first_file.clone()))?
        .count;
    let whole = workload(first);
    let mut by_index: BTreeMap<u32, (&String, &Report)> = BTreeMap::new();
    for (file, r) in inputs {
        let shard = r
            .config
            .spec
            .shard
            .ok_or_else(|| MergeError::NotShard(file.clone()))?;
        if let Some(field) = differing(&whole, &workload(r)) {
            return Err(MergeError::Differs {
                file: file.clone(),
                first: first_file.clone(),
                field,
            });
        }
        if let Some((other, _)) = by_index.insert(shard.index, (file, r)) {
            return Err(MergeError::Duplicate {
                file: file.clone(),
                other: other.clone(),
                index: shard.index,
            });
        }
    }
    crate::report::merge_check::check(inputs)?;
    let missing: Vec<u32> = (0..count).filter(|i| !by_index.contains_key(i)).collect();
    let most_runs = by_index
        .values()
        .map(|(_, r)| r.runs.len())
        .max()
        .unwrap_or(0);
    let mut runs = Vec::with_capacity(most_runs);
    for k in 0..most_runs {
        let parts: Vec<(u32, &RunReport)> = by_index
            .iter()
            .filter_map(|(i, (_, r))| r.runs.get(k).map(|run| (*i, run)))
            .collect();
        let present = missing.is_empty() && parts.len() == by_index.len();
        runs.push(Parts::new(parts).run(k as u32, present)?);
    }
    let starts: Vec<u64> = by_index
        .values()
        .filter_map(|(_, r)| r.runs.first()?.started_unix_us)
        .collect();
    let shards: Vec<ShardEntry> = by_index
        .iter()
        .map(|(i, (file, r))| ShardEntry {
            index: *i,
            file: (*file).clone(),
            hostname: r.environment.hostname.clone(),
            complete: r.complete,
            error: r
                .aborted
                .clone()
                .or_else(|| r.runs.iter().find_map(|run| run.first_error.clone())),
            start: r.start.clone(),
            saturated: r
                .runs
                .iter()
                .find_map(|run| run.client.as_ref()?.saturated.clone()),
        })
        .collect();
    let mut config = first.config.clone();
    config.spec.shard = None;
    let mut environment = first.environment.clone();
    environment.hostname = None;
    let expected = first.config.spec.runs as usize;
    let incomplete = shards
        .iter()
        .find(|s| !s.complete)
        .map(|s| format!("shard {} ({}) is incomplete", s.index, s.file));
    let aborted = match (missing.is_empty(), incomplete) {
        (false, _) => Some(format!(
            "shard(s) {} missing",
            missing
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (true, why) => why,
    };
    let meta = ReportMeta {
        tool,
        started_at: by_index
            .values()
            .map(|(_, r)| r.started_at.clone())
            .min()
            .unwrap_or_default(),
        command,
        config,
        environment,
    };
    let mut report = Report::new(meta, runs, expected, aborted)?;
    report.merged = Some(MergeInfo {
        count,
        shards,
        missing,
        start_spread_us: (starts.len() > 1)
            .then(|| starts.iter().max().unwrap_or(&0) - starts.iter().min().unwrap_or(&0)),
    });
    Ok(report)
}

#[cfg(test)]
mod tests;
