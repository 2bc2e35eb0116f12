//! How progress looks while a command runs: a bar on stderr, for terminals only.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::text::numbers::count;

/// A progress bar on stderr, shown only when stderr is a terminal and the work lasts > 1 s.
pub fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    bar.set_style(style(
        "{prefix}{bar:40} {pos}/{len} objects {per_sec} eta {eta}",
    ));
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

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("valid template")
}

/// Objects done of those expected, as a bytes bar's message: `3/10 objects`.
pub fn objects_done(done: u64, total: u64) -> String {
    format!("{}/{} objects", count(done), count(total))
}

/// What a comparison's bar says while one side runs: `round 3/10, h3 (B): `.
pub fn round_prefix(round: u32, rounds: u32, label: &str, side: char) -> String {
    format!("round {}/{rounds}, {label} ({side}): ", round + 1)
}

/// A command's progress bar, and what its observer counts into it.
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    /// A bar that moves with bytes: the objects done and expected, for its message.
    objects: Option<Arc<(AtomicU64, u64)>>,
}

impl Progress {
    /// No bar: the interval lines are the live view.
    pub fn hidden() -> Self {
        Self {
            bar: ProgressBar::hidden(),
            objects: None,
        }
    }

    /// A bar of `total` objects, moving as each is done.
    pub fn objects(total: u64) -> Self {
        Self {
            bar: progress_bar(total),
            objects: None,
        }
    }

    /// A held load's bar counts milliseconds: elapsed and remaining time.
    pub fn time(total_ms: u64) -> Self {
        let bar = progress_bar(total_ms);
        bar.set_style(style("{prefix}{bar:40} {elapsed} held, {eta} left"));
        Self { bar, objects: None }
    }

    /// A bar of `total_bytes` of payload over `objects` objects. An object's end is all the
    /// engine's observer hears of, so a few large objects (`1x30MB`) would hold a bar of
    /// objects still for as long as they take; this one moves with every body byte received
    /// (the engine's process-wide count, read on a tick), the objects done in its message,
    /// written on the same tick: formatting it for every object cost a small-object run about
    /// as much as a request's own TLS.
    pub fn bytes(total_bytes: u64, objects: u64) -> Self {
        let bar = progress_bar(total_bytes);
        bar.set_style(style(
            "{prefix}{bar:40} {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec}, {msg}, eta {eta}",
        ));
        bar.set_message(objects_done(0, objects));
        let base = qbench_engine::body_bytes_received();
        let counted = Arc::new((AtomicU64::new(0), objects));
        let (b, done) = (bar.clone(), counted.clone());
        tokio::spawn(async move {
            let mut shown = 0;
            while !b.is_finished() {
                let got = qbench_engine::body_bytes_received().saturating_sub(base);
                b.set_position(got.min(total_bytes));
                let now = done.0.load(Ordering::Relaxed);
                if now != shown {
                    b.set_message(objects_done(now, done.1));
                    shown = now;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Self {
            bar,
            objects: Some(counted),
        }
    }

    /// Text before the bar, e.g. which round and side of a comparison is running.
    pub fn set_prefix(&self, prefix: String) {
        self.bar.set_prefix(prefix);
    }

    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }

    /// `n` more objects done, or milliseconds held, as the engine reports them.
    pub fn advanced(&self, n: u64) {
        match &self.objects {
            // Counted only: the bar's tick writes the message.
            Some(o) => {
                o.0.fetch_add(n, Ordering::Relaxed);
            }
            None => self.bar.inc(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bytes_bar_says_the_objects_and_a_comparison_the_round_and_side() {
        assert_eq!(objects_done(0, 1), "0/1 objects");
        assert_eq!(objects_done(1_500, 20_000), "1,500/20,000 objects");
        assert_eq!(round_prefix(2, 10, "h3", 'B'), "round 3/10, h3 (B): ");
    }

    #[tokio::test(start_paused = true)]
    async fn a_bytes_bar_counts_objects_in_its_message_on_its_tick_not_its_position() {
        let p = Progress::bytes(1_000, 4);
        p.advanced(1);
        p.advanced(2);
        // Counted at once, written on the bar's tick (every 200 ms), not for each object.
        assert_eq!(p.bar.message(), "0/4 objects");
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(p.bar.message(), "3/4 objects");
        p.finish_and_clear();
        let objects = Progress {
            bar: ProgressBar::hidden(),
            objects: None,
        };
        objects.advanced(2);
        assert_eq!(objects.bar.position(), 2);
    }
}
