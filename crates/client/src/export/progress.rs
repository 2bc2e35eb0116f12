//! How progress looks while a command runs: a bar on stderr, for terminals only.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qbench_engine::observe::{Observe, Observer};

/// A progress bar on stderr, shown only when stderr is a terminal and the work lasts > 1 s.
pub fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} objects {per_sec} eta {eta}")
            .expect("valid template"),
    );
    if std::io::stderr().is_terminal() {
        // Only runs longer than a second get a bar.
        let b = bar.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if !b.is_finished() {
                b.set_draw_target(ProgressDrawTarget::stderr());
            }
        });
    }
    bar
}

/// A held load's bar counts milliseconds: elapsed and remaining time.
pub fn time_bar(total_ms: u64) -> ProgressBar {
    let bar = progress_bar(total_ms);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {elapsed} held, {eta} left")
            .expect("valid template"),
    );
    bar
}

/// A bar as the engine's observer of a run: it counts what the run reports.
struct Bar(ProgressBar);

impl Observe for Bar {
    fn advanced(&self, n: u64) {
        self.0.inc(n);
    }
}

/// What the engine reports a run's progress to, drawn on `bar`.
pub fn observer(bar: &ProgressBar) -> Observer {
    Arc::new(Bar(bar.clone()))
}
