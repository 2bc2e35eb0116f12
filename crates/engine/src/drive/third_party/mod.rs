//! `--client NAME`: a third-party client fetches the run's objects in qbench's place. Each
//! run spawns its processes (inside the client's namespace with a link), waits for them (at
//! most `--timeout` past the run's share of it), and turns what they printed, and what the
//! in-process server saw, into the same run report qbench's own clients produce.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use qbench_core::client_program::ClientProgram;
use qbench_core::errors::ErrorKind;
use qbench_core::report::third_party::{Anchor, ClientProcess, ThirdPartyRun, TimingSource};
use qbench_core::{Protocol, Recorder, RunReport};
use qbench_server::truth::{Seen, TruthLog};

use crate::drive::requests::Requests;
use crate::measure::clock::Clock;
use place::Reported;
use process::Ended;

mod adapters;
mod output;
mod own_files;
mod place;
mod process;
mod readers;
mod server_side;

pub(crate) use process::SpawnError;

/// A process run to its end, or why it could not start.
type Spawned = Result<Ended, SpawnError>;

/// One object of the run: its URL and the body length it asks for.
#[derive(Debug, Clone)]
pub(crate) struct Object {
    pub url: String,
    pub expected: Option<u64>,
}

/// Everything the adapters need to build and read a run's processes.
pub(crate) struct Ctx {
    pub program: ClientProgram,
    pub proto: Protocol,
    pub objects: Vec<Object>,
    pub connections: usize,
    pub streams: Option<usize>,
    pub reuse: bool,
    pub verify: bool,
    pub timeout: Duration,
    /// Where the server is, and the name its certificate carries.
    pub addr: SocketAddr,
    pub host: String,
    pub port: u16,
    /// The server's certificate, as a file the program can read; `None` with `--insecure`
    /// or the system's store.
    pub ca: Option<PathBuf>,
    pub insecure: bool,
    pub netns: Option<String>,
    /// The program found on PATH.
    pub path: PathBuf,
    /// `--client-cpu`/`--client-cpuset`: the limit its processes join as they start.
    pub cpu: Option<crate::setup::client_cpu::ProcessJoin>,
}

/// One process of a run, before it runs.
pub(crate) struct Invocation {
    pub argv: Vec<String>,
    /// Indices into `Ctx::objects` this process fetches.
    pub objects: Vec<usize>,
    /// Its own directory (bodies, config files), inside the run's.
    pub dir: PathBuf,
}

/// A third-party client, run again and again.
pub(crate) struct ThirdParty {
    ctx: Ctx,
    clock: Clock,
    truth: Option<Arc<TruthLog>>,
    /// Asked before the first run, for programs that do not say as they fetch.
    version: Option<String>,
    /// Holds the CA file and every run's directory; removed when dropped, and by
    /// `qbench-shaper cleanup` when qbench was killed.
    home: qbench_shaper::scratch::Scratch,
    /// Told when the processes cannot have cgroups of their own.
    observer: crate::observe::Observing,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    #[error("--client {client}: {source}")]
    Spawn {
        client: String,
        #[source]
        source: SpawnError,
    },
    #[error("--client: {0}")]
    Refused(String),
    #[error("--client: a working directory: {0}")]
    Dir(std::io::Error),
}

impl Drop for ThirdParty {
    /// A program killed without time to clean up may still be writing into its directory as
    /// it dies (a browser's profile, from processes outside its group): the removal is tried
    /// again for a while before `Scratch` makes its own last attempt.
    fn drop(&mut self) {
        for _ in 0..30 {
            match std::fs::remove_dir_all(self.home.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                _ => return,
            }
        }
    }
}

/// The URLs of every object of a run.
pub(crate) fn objects(requests: &Requests) -> Vec<Object> {
    (0..requests.len())
        .filter_map(|i| requests.get(i))
        .map(|r| Object {
            url: r.uri.to_string(),
            expected: r.expected_len,
        })
        .collect()
}

impl ThirdParty {
    /// Checks that the program exists and writes the certificate where it can read it.
    pub(crate) fn new(
        mut ctx: Ctx,
        ca_pem: Option<&str>,
        clock: Clock,
        truth: Option<Arc<TruthLog>>,
        observer: crate::observe::Observing,
    ) -> Result<Self, SetupError> {
        ctx.program
            .check(ctx.proto)
            .map_err(|e| SetupError::Refused(e.to_string()))?;
        let home = qbench_shaper::scratch::Scratch::create().map_err(SetupError::Dir)?;
        if let Some(pem) = ca_pem {
            let p = home.path().join("ca.pem");
            std::fs::write(&p, pem).map_err(SetupError::Dir)?;
            ctx.ca = Some(p);
        }
        ctx.path = adapters::locate(&ctx.program).map_err(|source| SetupError::Spawn {
            client: ctx.program.name().to_string(),
            source,
        })?;
        if let Some(t) = &truth {
            t.enable();
        }
        let version = adapters::version(&ctx.program, &ctx.path);
        Ok(Self {
            ctx,
            clock,
            truth,
            version,
            home,
            observer,
        })
    }

    pub(crate) fn objects(&self) -> u64 {
        self.ctx.objects.len() as u64
    }

    /// One run: every process to its end, then the report.
    pub(crate) async fn run(&mut self, index: u32) -> RunReport {
        // What the server saw before this run is not this run's.
        let _ = self.truth.as_ref().map(|t| t.take());
        let wall_start = std::time::SystemTime::now();
        let start = self.clock.now();
        let dir = self.home.path().join(format!("run-{index}"));
        let mut third = ThirdPartyRun {
            client: self.ctx.program.clone(),
            version: None,
            timings: TimingSource::Client,
            verified: 0,
            unverified: 0,
            processes: Vec::new(),
            notes: Vec::new(),
        };
        let invocations = match std::fs::create_dir_all(&dir)
            .and_then(|()| adapters::invocations(&self.ctx, &dir))
        {
            Ok(i) => i,
            Err(e) => {
                let mut rec = Recorder::new(index, self.objects(), start);
                rec.error(ErrorKind::Io, &format!("preparing the client's files: {e}"));
                return self.finish(rec, third, wall_start);
            }
        };
        let ended = self.spawn_all(invocations).await;
        let seen = self.truth.as_ref().map(|t| t.take());
        let (outcomes, failed) = self.read_ended(ended, seen.as_ref(), &mut third.processes);
        // The run's times count from when the client began to connect, as qbench's own
        // clients' do: a program's start-up (a browser's seconds) is not its page load time.
        let start = place::first_activity(&outcomes, seen.as_ref(), self.clock).unwrap_or(start);
        let mut rec = Recorder::new(index, self.objects(), start);
        for e in failed {
            rec.error(ErrorKind::Io, &e);
        }
        let placed = place::record(&self.ctx, &mut rec, &outcomes, seen.as_ref(), self.clock);
        third.version = placed.version.or_else(|| self.version.clone());
        third.notes = adapters::notes(&self.ctx.program, third.version.as_deref());
        third.timings = placed.timings;
        third.verified = placed.verified;
        third.unverified = placed.unverified;
        let mut report = self.finish(rec, third, wall_start);
        if let Some(seen) = seen {
            server_side::attach(&mut report, seen, self.clock, start);
        }
        // Bodies and config files of this run are not needed any more.
        let _ = std::fs::remove_dir_all(&dir);
        report
    }

    /// Runs every process of the run to its end: all at once, except `{url}` templates, which
    /// run as many at once as there are connections.
    async fn spawn_all(&self, invocations: Vec<Invocation>) -> Vec<(Invocation, Spawned)> {
        let (ctx, observer) = (&self.ctx, &self.observer);
        let at_once = match adapters::per_object(&ctx.program) {
            true => invocations.len().min(ctx.connections),
            false => invocations.len(),
        }
        .max(1);
        futures_util::stream::iter(invocations)
            .map(|inv| async move {
                let deadline = run_deadline(ctx, &inv.objects);
                let (netns, dir) = (ctx.netns.as_deref(), &inv.dir);
                let cpu = ctx.cpu.as_ref();
                let r = process::run(&inv.argv, (netns, cpu), dir, deadline, observer).await;
                (inv, r)
            })
            .buffer_unordered(at_once)
            .collect()
            .await
    }

    /// What each ended process reported, with its record (anchored on the server's clock
    /// where the program's own timings allow it) pushed to `processes`; and the errors of
    /// those that could not start.
    fn read_ended(
        &self,
        ended: Vec<(Invocation, Spawned)>,
        seen: Option<&Seen>,
        processes: &mut Vec<ClientProcess>,
    ) -> (Vec<(Invocation, Ended, Reported)>, Vec<String>) {
        let mut outcomes = Vec::new();
        let mut failed = Vec::new();
        for (inv, r) in ended {
            match r {
                Ok(e) => {
                    let mut reported = adapters::read(&self.ctx, &inv, &e, self.clock);
                    let placed = match self.ctx.program {
                        ClientProgram::Curl | ClientProgram::Ngtcp2 => {
                            place::anchor(&mut reported, seen, self.clock)
                        }
                        _ => None,
                    };
                    let mut record = e.record.clone();
                    record.anchor = placed.or(reported.anchor.map(|event| Anchor {
                        event,
                        one_way_us: None,
                    }));
                    processes.push(record);
                    outcomes.push((inv, e, reported));
                }
                Err(e) => failed.push(e.to_string()),
            }
        }
        (outcomes, failed)
    }

    fn finish(
        &self,
        rec: Recorder,
        third: ThirdPartyRun,
        wall_start: std::time::SystemTime,
    ) -> RunReport {
        let mut report = rec.finish(self.clock.now());
        report.started_unix_us = Some(qbench_core::spec::start::unix_us(wall_start));
        report.third_party = Some(third);
        report
    }
}

/// The slowest average rate a process's deadline allows its objects' bytes: 1 Mbit/s. Programs
/// without a no-progress limit of their own (h2load's, ngtcp2's idle timeout and curl's
/// `--speed-time` are theirs) would otherwise fail a large object on a slow link that a qbench
/// client, timing out on no progress alone, fetches whole.
pub(crate) const FLOOR_BYTES_PER_S: u64 = 125_000;

/// What `objects`' bytes take at `FLOOR_BYTES_PER_S` (objects of unknown length: nothing).
fn allowance(ctx: &Ctx, objects: &[usize]) -> Duration {
    let bytes: u64 = objects
        .iter()
        .filter_map(|&i| ctx.objects.get(i)?.expected)
        .fold(0, u64::saturating_add);
    Duration::from_secs_f64(bytes as f64 / FLOOR_BYTES_PER_S as f64)
}

/// How long a process fetching `objects` may take: `--timeout` for each object it may have to
/// fetch one after another (a browser's loads), at least `--timeout`, plus its bytes at
/// `FLOOR_BYTES_PER_S` and its start-up allowance.
fn run_deadline(ctx: &Ctx, objects: &[usize]) -> Duration {
    let serial = match ctx.streams {
        Some(s) if s > 0 => objects.len().div_ceil(s.max(1)),
        _ => 1,
    };
    let serial = match ctx.program {
        ClientProgram::Chromium => objects.len(),
        _ => serial,
    };
    ctx.timeout
        .saturating_mul(u32::try_from(serial.max(1)).unwrap_or(u32::MAX))
        .saturating_add(allowance(ctx, objects))
        .saturating_add(adapters::startup(&ctx.program))
}
