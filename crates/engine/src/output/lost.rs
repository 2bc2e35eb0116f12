//! Outputs written as a run goes (`--json-stream`, `--log-requests`, `--keylog`) that a
//! write failed on (a full disk, a reader that went away): each warns once when it happens,
//! and the command ends with an error naming them after its report is written, so that a
//! script never takes a log with a hole in it for a whole one.

use std::sync::Mutex;

use crate::observe::Observer;

static LOST: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());

/// Output `flag` failed: `why` says how. Only its first failure is kept, and said to `to`.
pub fn record(to: &dyn Observer, flag: &'static str, why: impl std::fmt::Display) {
    let mut lost = LOST.lock().unwrap_or_else(|e| e.into_inner());
    if lost.iter().any(|(f, _)| *f == flag) {
        return;
    }
    let why = why.to_string();
    to.warn(&format!("warning: {flag}: {why}; it is incomplete"));
    lost.push((flag, why));
}

/// `--keylog`: a key log that failed a write is an output lost, said to `to`.
pub fn check_key_log(to: &dyn Observer, log: Option<&qbench_stack::keylog::KeyLogTo>) {
    if let Some(why) = log.and_then(qbench_stack::keylog::KeyLogTo::failure) {
        record(to, "--keylog", why);
    }
}

/// An error naming every output that was not written whole, if any was.
pub fn check() -> anyhow::Result<()> {
    let lost = LOST.lock().unwrap_or_else(|e| e.into_inner());
    if lost.is_empty() {
        return Ok(());
    }
    let each: Vec<String> = lost.iter().map(|(f, why)| format!("{f} ({why})")).collect();
    anyhow::bail!("not written whole: {}", each.join(", "))
}
