//! Who fetches a side's objects: qbench's own runner, or a third-party client's processes.

use std::sync::Arc;

use qbench_core::RunReport;

use crate::drive::runner::Runner;
use crate::drive::third_party::ThirdParty;
use crate::drive::until::Stop;
use crate::observe::{Observer, Observing};

pub(crate) enum Driver {
    Own(Box<Runner>),
    Third {
        client: Box<ThirdParty>,
        /// Nothing holds a load with a third-party client: a stop has nothing to stop.
        stop: Arc<Stop>,
    },
}

impl Driver {
    pub(crate) async fn run(&mut self, index: u32, progress: &Observing) -> RunReport {
        match self {
            Self::Own(r) => r.run(index, progress).await,
            Self::Third { client, .. } => client.run(index).await,
        }
    }

    pub(crate) fn objects(&self) -> u64 {
        match self {
            Self::Own(r) => r.objects(),
            Self::Third { client, .. } => client.objects(),
        }
    }

    pub(crate) fn pinned_threads(&self) -> Option<usize> {
        match self {
            Self::Own(r) => r.pinned_threads(),
            Self::Third { .. } => None,
        }
    }

    /// The receive and send buffers the client's UDP sockets were granted: qbench's own
    /// (h3); a third-party client's are its own to say.
    pub(crate) fn udp_buffers(&self) -> Option<(u64, u64)> {
        match self {
            Self::Own(r) => r.udp_buffers(),
            Self::Third { .. } => None,
        }
    }

    /// Whether a stop ends a run of fixed objects with its requests in flight (qbench's own
    /// closed loop, page or video: they start nothing more), rather than dropping it.
    pub(crate) fn stops_fixed_runs(&self) -> bool {
        matches!(self, Self::Own(_))
    }

    pub(crate) fn stopper(&self) -> Arc<Stop> {
        match self {
            Self::Own(r) => r.stopper(),
            Self::Third { stop, .. } => stop.clone(),
        }
    }

    /// Only qbench's own requests are logged; a third-party client's are in its report.
    pub(crate) fn log_requests(
        &mut self,
        log: Arc<crate::drive::reqlog::RequestLog>,
        to: &Observing,
    ) {
        match self {
            Self::Own(r) => r.log_requests(log),
            Self::Third { .. } => to.warn(
                "warning: --log-requests logs qbench's own clients' requests; --client's are in the report",
            ),
        }
    }

    pub(crate) async fn finish(&mut self) {
        if let Self::Own(r) = self {
            r.finish().await;
        }
    }
}
