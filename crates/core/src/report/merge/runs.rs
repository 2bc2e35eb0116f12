//! One run merged across shards: counters added, histograms added exactly, and times laid
//! on the earliest shard's wall-clock time line.

use std::collections::BTreeMap;

use super::{merged, merged_opt, per_s, MergeError};
use crate::histogram::{HistogramError, HistogramExport};
use crate::report::connection::ConnectionRecord;
use crate::report::load::{IntervalRecord, LoadReport};
use crate::report::net_counters::RunNetCounters;
use crate::report::telemetry::Timeline;
use crate::report::{ObjectCounts, RunCpu, RunReport, Spread};
use crate::stats::noise::RunNoise;
use crate::stats::saturation::ClientLoad;
use crate::ErrorCounts;

/// One run of every shard that has it; `offsets` place each on the earliest one's time line.
pub(super) struct Parts<'a> {
    runs: Vec<(u32, &'a RunReport)>,
    offsets: Vec<u64>,
}

impl<'a> Parts<'a> {
    pub(super) fn new(runs: Vec<(u32, &'a RunReport)>) -> Self {
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
        // A shard from before the start lag was split has no client lag: the others' would
        // pass for them all.
        let split = loads
            .iter()
            .all(|(l, _)| l.client_lag.is_some() == l.lag.is_some());
        // One histogram of every shard's load, merged.
        let each = |f: fn(&LoadReport) -> Option<&HistogramExport>| {
            merged_opt(&loads.iter().map(|(l, _)| f(l)).collect::<Vec<_>>())
        };
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
            lag: each(|l| l.lag.as_ref())?,
            client_lag: match split {
                true => each(|l| l.client_lag.as_ref())?,
                false => None,
            },
            client_late: match split {
                true => loads.iter().map(|(l, _)| l.client_late).sum(),
                false => 0,
            },
            service_time: each(|l| l.service_time.as_ref())?,
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
                ttfb: merged_opt(&parts.iter().map(|p| p.ttfb.as_ref()).collect::<Vec<_>>())?,
                start_lag: merged_opt(
                    &parts
                        .iter()
                        .map(|p| p.start_lag.as_ref())
                        .collect::<Vec<_>>(),
                )?,
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

    pub(super) fn run(&self, index: u32, all_present: bool) -> Result<RunReport, MergeError> {
        let first_request = self.earliest(|r| r.first_request_us);
        let last_byte = self.latest(|r| r.last_byte_us);
        let payload = self.sum(|r| r.payload_bytes);
        let (digests, clash) = self.digests();
        let complete = all_present && clash.is_none() && self.runs.iter().all(|(_, r)| r.complete);
        let completed = self.sum(|r| r.objects.completed);
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
            handshake_us: self.handshake_us(),
            plt_us: self.plt_us(complete),
            goodput_bps: goodput_bps(payload, first_request, last_byte),
            payload_bytes: payload,
            objects: self.objects(completed),
            connections: self.connections(),
            errors: self.errors(),
            first_error: self.first_error().or(clash),
            object_latency: self.histogram(|r| &r.object_latency)?,
            ttfb: self.histogram(|r| &r.ttfb)?,
            cpu: self.cpu(payload).map(|c| c.per_object(completed)),
            // Each machine's client had its own cgroup: the shards' reports keep theirs, and
            // the merged config says what quota they all ran under.
            client_cpu: None,
            server_cpu: None,
            proxy: None,
            digests,
            telemetry: self.telemetry(),
            cc_states: None,
            load: self.load(completed)?,
            intervals: self.intervals()?,
            client: self.client()?,
            spread: Spread::merged(self.runs.iter().filter_map(|(_, r)| r.spread.clone())),
            noise: self.noise(),
            link_check: self.link_check(),
            net: self.net(),
            // A video session or a page is one client's: never sharded.
            video: None,
            page: None,
            third_party: None,
            server_program: None,
            server_view: None,
        })
    }

    /// The shards' counters added up, where every shard read them in the same scope: each
    /// shard's are its own machine's.
    fn net(&self) -> Option<RunNetCounters> {
        let mut all = self.runs.iter().map(|(_, r)| r.net);
        let first = all.next()??;
        all.try_fold(first, |sum, n| {
            let n = n.filter(|n| n.scope == sum.scope)?;
            // A buffer size is said where every shard's was the same.
            let same = |a: Option<u64>, b: Option<u64>| a.filter(|v| b == Some(*v));
            Some(RunNetCounters {
                scope: sum.scope,
                client: sum.client.plus(&n.client),
                server: sum.server.zip(n.server).map(|(a, b)| a.plus(&b)),
                client_udp_rcvbuf: same(sum.client_udp_rcvbuf, n.client_udp_rcvbuf),
                server_udp_rcvbuf: same(sum.server_udp_rcvbuf, n.server_udp_rcvbuf),
                client_udp_sndbuf: same(sum.client_udp_sndbuf, n.client_udp_sndbuf),
                server_udp_sndbuf: same(sum.server_udp_sndbuf, n.server_udp_sndbuf),
            })
        })
    }

    /// Each shard's handshake time is a mean over its connections that had one: weighted
    /// by their number, the means make the mean of all.
    fn handshake_us(&self) -> Option<u64> {
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
        (n > 0).then(|| hs / n)
    }

    /// The page is loaded when the last shard's part of it is, and only if every part was.
    fn plt_us(&self, complete: bool) -> Option<u64> {
        if complete && self.runs.iter().all(|(_, r)| r.plt_us.is_some()) {
            self.latest(|r| r.plt_us)
        } else {
            None
        }
    }

    fn objects(&self, completed: u64) -> ObjectCounts {
        ObjectCounts {
            requested: self.sum(|r| r.objects.requested),
            completed,
            failed: self.sum(|r| r.objects.failed),
            not_started: self.sum(|r| r.objects.not_started),
            retried: self.sum(|r| r.objects.retried),
        }
    }

    /// Every shard's connections, their starts moved onto the merged time line.
    fn connections(&self) -> Vec<ConnectionRecord> {
        let mut connections = Vec::new();
        for (_, r, o) in self.each() {
            connections.extend(r.connections.iter().cloned().map(|mut c| {
                c.started_us += o;
                c
            }));
        }
        connections
    }

    fn errors(&self) -> ErrorCounts {
        let mut errors = ErrorCounts::default();
        for (_, r) in &self.runs {
            errors.merge(&r.errors);
        }
        errors
    }

    /// The first error of the lowest shard that had one, naming that shard.
    fn first_error(&self) -> Option<String> {
        self.runs
            .iter()
            .find_map(|(i, r)| r.first_error.as_ref().map(|e| format!("shard {i}: {e}")))
    }

    fn histogram(
        &self,
        f: fn(&RunReport) -> &HistogramExport,
    ) -> Result<HistogramExport, HistogramError> {
        merged(&self.runs.iter().map(|(_, r)| f(r)).collect::<Vec<_>>())
    }

    /// CPU times added, when every shard measured them; per-GB figures from the total
    /// `payload`.
    fn cpu(&self, payload: u64) -> Option<RunCpu> {
        let c = self
            .runs
            .iter()
            .map(|(_, r)| r.cpu.as_ref())
            .collect::<Option<Vec<_>>>()?;
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
        Some(cpu)
    }

    fn telemetry(&self) -> Option<Vec<Timeline>> {
        let telemetry: Vec<_> = self
            .runs
            .iter()
            .filter_map(|(_, r)| r.telemetry.clone())
            .flatten()
            .collect();
        (!telemetry.is_empty()).then_some(telemetry)
    }

    /// A merged run is as noisy as its noisiest shard.
    fn noise(&self) -> Option<RunNoise> {
        self.runs
            .iter()
            .filter_map(|(_, r)| r.noise.clone())
            .max_by(|a, b| a.steal_pct.total_cmp(&b.steal_pct))
    }

    /// Each shard has its own link: the merged run keeps the first one that could not carry
    /// its shard, so that a shortfall is never merged away.
    fn link_check(&self) -> Option<crate::report::link_run::LinkRun> {
        let mut checks = self.runs.iter().filter_map(|(_, r)| r.link_check.as_ref());
        let first = checks.clone().next()?;
        Some(checks.find(|c| !c.carried()).unwrap_or(first).clone())
    }
}

/// Bits per second of `payload` from the first request to the last byte; none over an empty
/// or backward window.
fn goodput_bps(payload: u64, first_request: Option<u64>, last_byte: Option<u64>) -> Option<f64> {
    first_request
        .zip(last_byte)
        .filter(|(f, l)| l > f)
        .filter(|_| payload > 0)
        .map(|(f, l)| payload as f64 * 8.0 / ((l - f) as f64 / 1e6))
}
