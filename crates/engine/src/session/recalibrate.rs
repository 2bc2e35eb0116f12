//! `qbench compare --recalibrate`: the shared link measured again between rounds.

use super::side::Side;
use crate::observe::{Observer, Observing};
use crate::signals::{self, Interrupted};

/// `--recalibrate`: measures each segment of the shared link again before `round`, on a
/// blocking thread while the link stays borrowed by the sides. A field that misses is warned
/// about to `observer`; what ends the rounds (a miss under `--strict-link`, or a measurement that failed)
/// is returned, for the report's `aborted`.
pub(super) async fn recalibrate(
    strict: bool,
    side: &Side<'_>,
    round: u32,
    observer: &Observing,
) -> Option<String> {
    let mut missed = Vec::new();
    for (flag, link) in side.links() {
        let (names, spec) = link.measurable();
        // A measurement takes seconds (minutes on a long delay): a stopping signal ends it
        // within a poll, as it ends a round.
        let halt = qbench_shaper::stop::Stop::when(|| signals::untaken().is_some());
        let measured = tokio::task::spawn_blocking(move || {
            qbench_shaper::calibrate::calibrate_until(&names, &spec, &halt)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
        if let Some(sig) = signals::take() {
            let when = format!("while {flag} was measured before round {round}");
            return Some(Interrupted::new(sig, when).to_string());
        }
        let c = match measured {
            Ok(c) => c,
            Err(e) => return Some(format!("--recalibrate: {flag} before round {round}: {e}")),
        };
        for m in c.misses() {
            let line = format!("{flag} before round {round}: {}", m.line());
            observer.warn(&format!("warning: {line}"));
            missed.push(line);
        }
        link.record_recalibration(round, c);
    }
    (strict && !missed.is_empty()).then(|| format!("--strict-link: {}", missed.join("; ")))
}
