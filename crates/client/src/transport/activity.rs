//! When bytes last moved on a TCP connection, so that "no progress" is the connection's: a
//! request waiting for an h2 stream (above the server's SETTINGS_MAX_CONCURRENT_STREAMS) is
//! not timed out while its connection keeps moving.

use std::future::Future;
use std::time::Duration;

pub(crate) use qbench_server::activity::{Activity, Counted};
use tokio::time::Instant;

use super::FetchError;

/// `fut`, ended with a timeout only once it has not finished and nothing has moved for
/// `after`: no byte on the connection, with an `activity`; nothing at all, without one. The
/// count starts at the step's start at the earliest.
pub(crate) async fn step_while_moving<T, E>(
    activity: Option<&Activity>,
    what: &str,
    after: Duration,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, FetchError>
where
    E: std::error::Error + 'static,
{
    tokio::pin!(fut);
    let start = Instant::now();
    let last = || activity.map_or(start, |a| a.last().max(start));
    loop {
        tokio::select! {
            r = &mut fut => return r.map_err(|e| FetchError::from_err(what, &e)),
            () = tokio::time::sleep_until(last() + after) => {
                if last() + after <= Instant::now() {
                    return Err(FetchError::timeout(what, after));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[tokio::test(start_paused = true)]
    async fn a_moving_connection_never_times_out_a_waiting_request() {
        let a = Activity::default();
        let after = Duration::from_secs(1);
        let mover = a.clone();
        // Bytes move every 500 ms for 5 s; the request resolves at 4 s.
        tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                mover.touch();
            }
        });
        let slow = async {
            tokio::time::sleep(Duration::from_secs(4)).await;
            Ok::<_, io::Error>(7)
        };
        assert_eq!(
            step_while_moving(Some(&a), "waiting", after, slow)
                .await
                .unwrap(),
            7
        );
        // Once nothing moves, the next wait ends after `after`.
        let never = std::future::pending::<Result<(), io::Error>>();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let e = step_while_moving(Some(&a), "waiting", after, never)
            .await
            .unwrap_err();
        assert_eq!(e.kind, qbench_core::ErrorKind::Timeout);
    }
}
