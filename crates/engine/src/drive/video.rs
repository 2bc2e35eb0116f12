//! A video session on one connection: the player model says what to fetch and when, and
//! each segment is fetched from the server's `/bytes/{n}` and recorded as one of the run's
//! objects.

use qbench_core::video::{Next, Player, VideoReport, VideoSpec};

use crate::drive::app::AppRun;
use crate::drive::lock;
use crate::observe::Observer;
use crate::transport::fetch;
use crate::transport::Conn;

/// Plays `spec` over `conn` until the video is downloaded, a segment fails, the watch time
/// is over or a stop comes; a segment still downloading at the watch time is abandoned, not
/// failed, and one downloading at a stop finishes.
/// Returns the session's figures, the segments requested (the abandoned one excluded) and
/// whether one was abandoned: its response was cut off, so an HTTP/1.1 connection is gone.
pub(crate) async fn play(
    conn: &dyn Conn,
    spec: VideoSpec,
    s: AppRun<'_>,
) -> (VideoReport, u64, bool) {
    let clock = s.clock;
    let mut player = Player::new(spec, s.start);
    let watch_end = player.watch_end();
    let mut requested = 0u64;
    let mut abandoned = false;
    loop {
        if s.stop.is_set() {
            break;
        }
        let now = clock.now();
        match player.next(now) {
            Next::Done => break,
            Next::Wait(at) => tokio::select! {
                () = tokio::time::sleep_until(clock.at(at)) => {}
                () = s.stop.wait() => {}
            },
            Next::Fetch { bytes, .. } => {
                let req = s.request(bytes);
                let fetching = fetch(conn, &clock, &req, s.book);
                let outcome = match watch_end {
                    Some(end) => tokio::select! {
                        // A segment that lands as the watch time ends is counted.
                        biased;
                        o = fetching => Some(o),
                        () = tokio::time::sleep_until(clock.at(end)) => None,
                    },
                    None => Some(fetching.await),
                };
                let Some(outcome) = outcome else {
                    abandoned = true;
                    break;
                };
                requested += 1;
                s.progress.advanced(1);
                if let Some(l) = s.log {
                    l.line(0, &req.uri, &outcome);
                }
                let (done, ok) = (outcome.done, outcome.error.is_none());
                lock(s.rec).object(outcome);
                if ok {
                    player.downloaded(done);
                } else {
                    player.failed(done);
                }
            }
        }
    }
    (player.finish(clock.now()), requested, abandoned)
}
