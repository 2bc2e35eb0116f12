//! One object fetched into a run's records, as every driver fetches it: the recorder's lock,
//! and a body checked against earlier fetches of the same URL.

use std::sync::Mutex;

use qbench_core::{ErrorKind, ObjectOutcome, Recorder};

use crate::measure::clock::Clock;
use crate::transport::verify::DigestBook;
use crate::transport::{fetch, Conn, ObjectReq};

pub(crate) fn lock(rec: &Mutex<Recorder>) -> std::sync::MutexGuard<'_, Recorder> {
    rec.lock().expect("recorder lock")
}

/// Fetches one object; a body whose digest differs from an earlier fetch of the same URL
/// counts as a mismatch.
pub(crate) async fn fetch_one(
    conn: &dyn Conn,
    clock: &Clock,
    req: &ObjectReq,
    book: &DigestBook,
) -> ObjectOutcome {
    let mut fetched = fetch(conn, clock, req).await;
    if let Some(d) = &fetched.digest {
        if let Some(prev) = book.record(&req.uri.to_string(), d) {
            fetched.outcome.error = Some((
                ErrorKind::BodyMismatch,
                format!(
                    "{}: sha256 {d} differs from an earlier fetch's {prev}",
                    req.uri
                ),
            ));
        }
    }
    fetched.outcome
}
