//! When each open-loop request is due. tokio's timer ticks in milliseconds and rounds a
//! deadline up to its next tick, which would start every request up to 1 ms late; on the
//! real clock a thread of its own sleeps to each due time instead (with 1 us timer slack)
//! and hands the request to the runtime. On tokio's paused test clock, a task does it.

use std::time::{Duration, Instant};

use qbench_core::load::Schedule;
use tokio::sync::mpsc;

use crate::hold::Until;

/// Request `j` of the schedule is due at `at` on the run clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Due {
    pub(crate) j: u64,
    pub(crate) at: Duration,
}

/// Due requests queued between the pacer and the runtime: if the runtime falls behind, the
/// pacer waits, and the requests still carry their due times, so the lag is counted.
const QUEUE: usize = 4096;
/// The pacer looks at the stop this often while it sleeps.
const STOP_CHECK: Duration = Duration::from_millis(20);
/// The pacer wakes at most once per quantum and then hands over every request due by then:
/// a start is at most this late from pacing, and at 100,000 requests per second the thread
/// still wakes only 10,000 times (a wake-up costs a few microseconds of CPU, more in a VM).
pub(crate) const QUANTUM: Duration = Duration::from_micros(100);

/// Starts pacing `schedule` from `start` (an offset on the run clock) until `until`.
pub(crate) fn pace(
    schedule: Schedule,
    start: Duration,
    until: Until,
) -> std::io::Result<mpsc::Receiver<Due>> {
    let (tx, rx) = mpsc::channel(QUEUE);
    if until.clock.is_real() {
        let epoch = until.clock.at(Duration::ZERO).into_std();
        std::thread::Builder::new()
            .name("qbench-pacer".into())
            .spawn(move || pace_thread(schedule, start, until, epoch, tx))?;
    } else {
        tokio::spawn(pace_task(schedule, start, until, tx));
    }
    Ok(rx)
}

fn pace_thread(
    schedule: Schedule,
    start: Duration,
    until: Until,
    epoch: Instant,
    tx: mpsc::Sender<Due>,
) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut woke = Instant::now();
    for (j, offset) in (0u64..).zip(schedule) {
        let at = start + offset;
        if at >= until.end() {
            return;
        }
        let due = epoch + at;
        if Instant::now() < due {
            let wake = due.max(woke + QUANTUM);
            loop {
                if until.stop.is_set() {
                    return;
                }
                let now = Instant::now();
                if now >= wake {
                    break;
                }
                std::thread::sleep((wake - now).min(STOP_CHECK));
            }
            woke = Instant::now();
        }
        if tx.blocking_send(Due { j, at }).is_err() {
            return;
        }
    }
}

async fn pace_task(schedule: Schedule, start: Duration, until: Until, tx: mpsc::Sender<Due>) {
    for (j, offset) in (0u64..).zip(schedule) {
        let at = start + offset;
        if at >= until.end() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(until.clock.at(at)) => {}
            () = until.stop.wait() => return,
        }
        if tx.send(Due { j, at }).await.is_err() {
            return;
        }
    }
}
