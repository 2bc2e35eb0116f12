//! `qbench merge`: the reports of a workload's shards added into the report of the whole.
//! Histograms add exactly (HdrHistogram V2), counters add, and rates are taken over the
//! union of the shards' windows laid on one wall-clock time line.

use std::collections::BTreeMap;

use crate::histogram::{HistogramError, HistogramExport, LatencyHistogram};
pub use crate::report::merge_info::{MergeInfo, ShardEntry};
use crate::report::{Report, ReportMeta, RunReport, ToolInfo};

mod runs;
use runs::Parts;

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
    // The inner error speaks for itself: `{:#}` would print it twice.
    #[error(transparent)]
    Histogram(#[from] HistogramError),
    // The inner error speaks for itself: `{:#}` would print it twice.
    #[error(transparent)]
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

/// Each shard's report, with the file it came from, by shard index.
type ByIndex<'a> = BTreeMap<u32, (&'a String, &'a Report)>;

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
    let by_index = by_index(inputs, first_file, &workload(first))?;
    crate::report::merge_check::check(inputs)?;
    let missing: Vec<u32> = (0..count).filter(|i| !by_index.contains_key(i)).collect();
    let runs = runs(&by_index, missing.is_empty())?;
    let shards = shard_entries(&by_index);
    let aborted = aborted(&missing, &shards);
    let expected = first.config.spec.runs as usize;
    let meta = meta(first, &by_index, tool, command);
    let mut report = Report::new(meta, runs, expected, aborted)?;
    report.merged = Some(MergeInfo {
        count,
        shards,
        missing,
        start_spread_us: start_spread_us(&by_index),
    });
    Ok(report)
}

/// The inputs by shard index, refusing any that is not a shard of `whole`, the workload of
/// `first_file`, or repeats an index.
fn by_index<'a>(
    inputs: &'a [(String, Report)],
    first_file: &str,
    whole: &BTreeMap<String, serde_json::Value>,
) -> Result<ByIndex<'a>, MergeError> {
    let mut by_index = ByIndex::new();
    for (file, r) in inputs {
        let shard = r
            .config
            .spec
            .shard
            .ok_or_else(|| MergeError::NotShard(file.clone()))?;
        if let Some(field) = differing(whole, &workload(r)) {
            return Err(MergeError::Differs {
                file: file.clone(),
                first: first_file.to_string(),
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
    Ok(by_index)
}

/// Run `k` of every shard merged, for each `k` any shard has; a run is complete only if
/// every shard, none missing, ran it.
fn runs(by_index: &ByIndex<'_>, none_missing: bool) -> Result<Vec<RunReport>, MergeError> {
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
        let present = none_missing && parts.len() == by_index.len();
        runs.push(Parts::new(parts).run(k as u32, present)?);
    }
    Ok(runs)
}

fn shard_entries(by_index: &ByIndex<'_>) -> Vec<ShardEntry> {
    by_index
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
        .collect()
}

/// Why the whole is not complete: missing shards first, else the first incomplete one.
fn aborted(missing: &[u32], shards: &[ShardEntry]) -> Option<String> {
    let incomplete = shards
        .iter()
        .find(|s| !s.complete)
        .map(|s| format!("shard {} ({}) is incomplete", s.index, s.file));
    match (missing.is_empty(), incomplete) {
        (false, _) => Some(format!(
            "shard(s) {} missing",
            missing
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (true, why) => why,
    }
}

/// The first shard's meta as the whole's: no shard index, no one host, and the earliest
/// start.
fn meta(
    first: &Report,
    by_index: &ByIndex<'_>,
    tool: ToolInfo,
    command: Vec<String>,
) -> ReportMeta {
    let mut config = first.config.clone();
    config.spec.shard = None;
    let mut environment = first.environment.clone();
    environment.hostname = None;
    ReportMeta {
        tool,
        started_at: by_index
            .values()
            .map(|(_, r)| r.started_at.clone())
            .min()
            .unwrap_or_default(),
        command,
        config,
        environment,
    }
}

/// How far apart the shards' first runs started, when more than one says.
fn start_spread_us(by_index: &ByIndex<'_>) -> Option<u64> {
    let starts: Vec<u64> = by_index
        .values()
        .filter_map(|(_, r)| r.runs.first()?.started_unix_us)
        .collect();
    (starts.len() > 1)
        .then(|| starts.iter().max().unwrap_or(&0) - starts.iter().min().unwrap_or(&0))
}

#[cfg(test)]
pub(crate) mod tests;
