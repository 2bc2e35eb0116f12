//! A run against a server program (`--server`): started before the run, stopped after it,
//! and what that adds to the run's report.

use qbench_core::{ErrorKind, Recorder, RunReport};

use crate::setup::server_program::{ProgramServer, Running};

/// The report of a run whose server never came up: nothing was fetched, and it says why.
pub(super) fn not_started(index: u32, objects: u64, why: &str) -> RunReport {
    let mut rec = Recorder::new(index, objects, std::time::Duration::ZERO);
    rec.error(ErrorKind::Io, why);
    rec.finish(std::time::Duration::ZERO)
}

/// Stops the run's server and records it; a server that had ended before it was stopped
/// fails the run, which was then not served to its end by the server it names.
pub(super) async fn stop(running: Running, rep: &mut RunReport) {
    let record = match running.stop().await {
        Ok(r) => r,
        Err(r) => {
            if rep.complete {
                rep.complete = false;
                rep.first_error = Some(format!(
                    "--server {}: it ended during the run ({})",
                    r.name, r.ended
                ));
            }
            r
        }
    };
    rep.server_program = Some(record);
}

/// The server's CPU over the run, from its record, as qbench's CPU accounting has it.
pub(super) fn cpu(rep: &RunReport) -> Option<qbench_core::CpuTimes> {
    let r = rep.server_program.as_ref()?;
    Some(qbench_core::CpuTimes {
        user_s: r.user_s,
        sys_s: r.sys_s,
        ..Default::default()
    })
}

/// Starts `program` for run `index`, or the report of the run that could not be.
#[expect(
    clippy::result_large_err,
    reason = "once per run; the failed run's report is what the caller records"
)]
pub(super) async fn start(
    program: Option<&ProgramServer>,
    index: u32,
    objects: u64,
    observer: &crate::observe::Observing,
) -> Result<Option<Running>, RunReport> {
    let Some(p) = program else { return Ok(None) };
    match p.start(observer).await {
        Ok(r) => Ok(Some(r)),
        Err(why) => {
            let mut rep = not_started(index, objects, &why);
            rep.server_program = None;
            Err(rep)
        }
    }
}
