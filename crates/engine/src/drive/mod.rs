//! What drives the requests of a run: closed loop, held and open loops, video sessions and pages, over the transports into the recorder.

pub(crate) mod app;
pub(crate) mod hold;
pub(crate) mod lanes;
pub(crate) mod pace_timer;
pub(crate) mod pacer;
pub(crate) mod page;
pub(crate) mod reqlog;
pub(crate) mod requests;
pub(crate) mod runner;
pub(crate) mod third_party;
pub(crate) mod until;
pub(crate) mod video;
pub(crate) mod workers;

/// The run's recorder, as every driver that fetches objects into it takes it.
pub(crate) fn lock(
    rec: &std::sync::Mutex<qbench_core::Recorder>,
) -> std::sync::MutexGuard<'_, qbench_core::Recorder> {
    rec.lock().expect("recorder lock")
}
