//! How the engine tells whoever drives it what is happening, without printing: a run's
//! progress, its intervals, and warnings (a barrier already passed, an output that lost a
//! write, telemetry a server did not give) all go to the one [`Observer`] it is given.

use std::sync::{Arc, Mutex};

use qbench_core::report::load::IntervalRecord;

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

/// The observer a command's runs report to, and the warnings already given to it that are
/// said once however many sides, runs or sweep cells come across them. Clones share both.
#[derive(Clone)]
pub struct Observing {
    to: Arc<dyn Observer>,
    said: Arc<Mutex<Vec<String>>>,
}

impl Observing {
    pub fn new(to: Arc<dyn Observer>) -> Self {
        Self {
            to,
            said: Arc::default(),
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
        self.to.interval(run, r);
    }

    fn warn(&self, line: &str) {
        self.to.warn(line);
    }

    fn note(&self, line: &str) {
        self.to.note(line);
    }
}

/// An observer for callers that show nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unobserved;

impl Observer for Unobserved {}

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
