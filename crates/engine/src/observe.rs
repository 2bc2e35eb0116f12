//! How the engine tells whoever drives it what is happening, without printing: a run's
//! progress, its intervals, and warnings (a barrier already passed, an output that lost a
//! write, telemetry a server did not give) all go to the one [`Observer`] it is given, and so
//! do the moments a command's lifecycle hands over: its side started, its runs ended, a report
//! to show and write.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use qbench_core::report::compare::CompareReport;
use qbench_core::report::load::IntervalRecord;
use qbench_core::spec::RunSpec;
use qbench_core::{Report, ReportMeta};

/// Work an observer hands back for the engine to await on its own runtime.
pub type Later<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A side of a command, connected to its peer and about to run.
#[derive(Debug, Clone, Copy)]
pub struct Started<'a> {
    pub spec: &'a RunSpec,
    /// Objects each of its runs fetches (a shard's share of the workload).
    pub objects: u64,
    /// Objects the whole plan names (every shard's).
    pub total_objects: u64,
    /// The peer's `host:port`, and what it is (the in-process server, a URL's host...).
    pub authority: &'a str,
    pub description: &'a str,
    pub meta: &'a ReportMeta,
}

/// Where a command is between its runs: which side of which round runs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage<'a> {
    /// Round `round` (from 0) of `of`, side `side` ('A' or 'B') labelled `label`.
    Round {
        round: u32,
        of: u32,
        label: &'a str,
        side: char,
    },
    /// Warm-up round `round` (from 0) of `of`, before round 0.
    WarmUp {
        round: u32,
        of: u32,
        label: &'a str,
        side: char,
    },
}

/// A report the engine hands over, of whichever command.
#[derive(Debug, Clone, Copy)]
pub enum Document<'a> {
    Run(&'a Report),
    Compare(&'a CompareReport),
}

/// Which report the engine hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Of a command that ended before its first run (a signal, an unreachable peer).
    Unstarted,
    /// After each run, for outputs rewritten as the runs go.
    SoFar,
    /// Once, when the runs are over and before anything is torn down.
    Final,
    /// The final report again, now saying that a late signal came.
    Amended,
}

/// Whoever drives the engine, told what happens as it happens. Each method does nothing
/// unless the driver wants to hear of it.
pub trait Observer: Send + Sync {
    /// Progress of a run, in the unit its plan counts: objects fetched, or milliseconds held.
    fn advanced(&self, _n: u64) {}
    /// Run `run` ended an interval (`--interval`, or one implied by a live output).
    fn interval(&self, _run: u32, _r: &IntervalRecord) {}
    /// A warning for the user, as one line without its newline.
    fn warn(&self, _line: &str) {}
    /// Something the user is told that is not a warning, as one line.
    fn note(&self, _line: &str) {}
}

/// What a command shows and writes at the moments its lifecycle hands over: the sides open,
/// a round's side begins, the runs end, a report is ready. Each method does nothing unless
/// the command wants it.
pub trait Presenter: Send + Sync {
    /// The sides are connected and their runs begin: what is shown while they run starts here.
    fn started<'a>(&'a self, _sides: &'a [Started<'a>]) -> Later<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    /// A side of a round begins.
    fn stage(&self, _s: &Stage<'_>) {}
    /// Whether a report after each run is wanted: building one is not free.
    fn wants_so_far(&self) -> bool {
        false
    }
    /// The runs are over: what was shown while they ran gives the terminal back.
    fn ended(&self) {}
    /// A report to show and write. An error of a `Final` one fails the command, after the
    /// engine has looked for a signal that came meanwhile.
    fn report(&self, _w: Written, _d: Document<'_>) -> anyhow::Result<()> {
        Ok(())
    }
    /// After the final report is written: whatever still has to see it (a last scrape).
    fn settle(&self) -> Later<'_, ()> {
        Box::pin(async {})
    }
}

/// Looks at each interval before the observer is told of it (`--fail-early`'s judge).
pub type IntervalHook = Arc<dyn Fn(&IntervalRecord) + Send + Sync>;

/// The one handle a command gives the engine: its observer, its presenter, and the warnings
/// already given that are said once however many sides, runs or sweep cells come across
/// them. Clones share all of it.
#[derive(Clone)]
pub struct Observing {
    to: Arc<dyn Observer>,
    presenter: Arc<dyn Presenter>,
    before_interval: Option<IntervalHook>,
    said: Arc<Mutex<Vec<String>>>,
}

impl Observing {
    pub fn new(to: Arc<dyn Observer>) -> Self {
        Self {
            to,
            presenter: Arc::new(Unobserved),
            before_interval: None,
            said: Arc::default(),
        }
    }

    /// The same observer and warnings said once, with `presenter` showing the command.
    pub fn presenting(&self, presenter: Arc<dyn Presenter>) -> Self {
        Self {
            presenter,
            ..self.clone()
        }
    }

    /// The same, with `hook` looking at each interval first.
    pub fn judging(&self, hook: IntervalHook) -> Self {
        Self {
            before_interval: Some(hook),
            ..self.clone()
        }
    }

    /// `line`, unless a warning of the same `kind` was given before.
    pub fn warn_once(&self, kind: &str, line: &str) {
        let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
        if said.iter().any(|k| k == kind) {
            return;
        }
        said.push(kind.to_string());
        drop(said);
        self.to.warn(line);
    }
}

impl std::fmt::Debug for Observing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observing")
    }
}

impl Observer for Observing {
    fn advanced(&self, n: u64) {
        self.to.advanced(n);
    }

    fn interval(&self, run: u32, r: &IntervalRecord) {
        if let Some(hook) = &self.before_interval {
            hook(r);
        }
        self.to.interval(run, r);
    }

    fn warn(&self, line: &str) {
        self.to.warn(line);
    }

    fn note(&self, line: &str) {
        self.to.note(line);
    }
}

impl Presenter for Observing {
    fn started<'a>(&'a self, sides: &'a [Started<'a>]) -> Later<'a, anyhow::Result<()>> {
        self.presenter.started(sides)
    }

    fn stage(&self, s: &Stage<'_>) {
        self.presenter.stage(s);
    }

    fn wants_so_far(&self) -> bool {
        self.presenter.wants_so_far()
    }

    fn ended(&self) {
        self.presenter.ended();
    }

    fn report(&self, w: Written, d: Document<'_>) -> anyhow::Result<()> {
        self.presenter.report(w, d)
    }

    fn settle(&self) -> Later<'_, ()> {
        self.presenter.settle()
    }
}

/// An observer for callers that show nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unobserved;

impl Observer for Unobserved {}

impl Presenter for Unobserved {}

/// An observer that shows nothing.
pub fn unobserved() -> Observing {
    Observing::new(Arc::new(Unobserved))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Lines(Mutex<Vec<String>>);

    impl Observer for Lines {
        fn warn(&self, line: &str) {
            self.0.lock().unwrap().push(line.to_string());
        }
    }

    #[test]
    fn a_warning_given_once_is_said_once_by_every_clone() {
        let lines = Arc::new(Lines::default());
        let o = Observing::new(lines.clone());
        let copy = o.clone();
        o.warn_once("gso", "warning: GSO is off");
        copy.warn_once("gso", "warning: GSO is off");
        o.warn_once("cgroup", "warning: no cgroup (a)");
        copy.warn_once("cgroup", "warning: no cgroup (b)");
        o.warn("warning: said each time");
        copy.warn("warning: said each time");
        let fresh = Observing::new(lines.clone());
        fresh.warn_once("gso", "warning: GSO is off");
        assert_eq!(
            *lines.0.lock().unwrap(),
            [
                "warning: GSO is off",
                "warning: no cgroup (a)",
                "warning: said each time",
                "warning: said each time",
                "warning: GSO is off",
            ]
        );
    }
}
