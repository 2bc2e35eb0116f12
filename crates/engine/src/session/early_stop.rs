//! `--fail-early`: the `--fail-if` conditions judged interval by interval as a held load runs;
//! the first time one holds, the load stops starting requests and the command says why.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use qbench_core::report::early_stop::EarlyStop;
use qbench_core::report::load::IntervalRecord;
use qbench_core::spec::threshold::Threshold;

use crate::drive::until::Stop;
use crate::observe::{Observer, Observing};

/// The conditions, judged on each interval before the command's observer is told of it.
pub(crate) struct Judged {
    to: Observing,
    early: Option<Mutex<EarlyStop>>,
    tripped: Mutex<Option<String>>,
    stop: OnceLock<Arc<Stop>>,
}

impl Judged {
    /// Judges `thresholds` early when `fail_early`, telling `to` when one holds.
    pub(crate) fn new(to: Observing, thresholds: &[Threshold], fail_early: bool) -> Arc<Self> {
        Arc::new(Self {
            to,
            early: fail_early
                .then(|| EarlyStop::new(thresholds))
                .flatten()
                .map(Mutex::new),
            tripped: Mutex::new(None),
            stop: OnceLock::new(),
        })
    }

    /// What a condition that held stops: the side's held load, once it is open.
    pub(crate) fn stops(&self, stop: Arc<Stop>) {
        let _ = self.stop.set(stop);
    }

    /// The conditions that held, once one did.
    pub(crate) fn tripped(&self) -> Option<String> {
        self.tripped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Adds `r` to the conditions; the first time one holds, says so and stops the load.
    pub(crate) fn judge(&self, r: &IntervalRecord) {
        let Some(early) = &self.early else {
            return;
        };
        let mut tripped = self.tripped.lock().unwrap_or_else(PoisonError::into_inner);
        if tripped.is_some() {
            return;
        }
        let held = early.lock().unwrap_or_else(PoisonError::into_inner).add(r);
        match held {
            Ok(Some(line)) => {
                self.to.note(&format!("--fail-early: {line}: stopping"));
                *tripped = Some(line);
                if let Some(stop) = self.stop.get() {
                    stop.stop();
                }
            }
            Ok(None) => {}
            Err(e) => self.to.warn(&format!("warning: --fail-early: {e}")),
        }
    }
}
