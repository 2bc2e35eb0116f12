//! Waiting, once a link is built, until it has carried a datagram each way, so that what is
//! measured or run first does not meet a link whose path is not yet carrying traffic. A lossy
//! link may take a few tries; one that drops everything one way is not waited for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qbench_core::report::link::Names;
use qbench_core::spec::link::LinkSpec;

use crate::calibrate::{one_way, udp_in, CalibrateError};
use crate::stop::Stop;

/// The longest a link is waited for, beyond its own round trip: a link that has carried
/// nothing by then is left to the calibration (or the runs) to report.
pub const SETTLE_TIME: Duration = Duration::from_secs(10);

/// Sends a small datagram from the client namespace to the server's, which echoes it, until
/// an echo returns: how long that took, or `None` when none did within [`SETTLE_TIME`] plus
/// twice the link's delay, or when a direction drops everything; `CalibrateError::Stopped`
/// within a poll of `halt` saying so.
pub fn settle(
    names: &Names,
    spec: &LinkSpec,
    halt: &Stop,
) -> Result<Option<Duration>, CalibrateError> {
    if spec.up.loss >= 1.0 || spec.down.loss >= 1.0 {
        return Ok(None);
    }
    let server = udp_in(&names.server, &names.server_addr())?;
    let client = udp_in(&names.client, &names.client_addr())?;
    let to = server
        .local_addr()
        .map_err(|source| CalibrateError::Socket {
            what: "the settling echo's address",
            source,
        })?;
    client
        .connect(to)
        .map_err(|source| CalibrateError::Socket {
            what: "connecting the settling echo",
            source,
        })?;
    let stop = Arc::new(AtomicBool::new(false));
    let echo_stop = stop.clone();
    // `udp_in` gives both sockets a short read timeout, so each side polls its stop.
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while !echo_stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = server.recv_from(&mut buf) {
                let _ = server.send_to(&buf[..n], from);
            }
        }
    });
    let began = Instant::now();
    let limit = SETTLE_TIME + (one_way(&spec.up) + one_way(&spec.down)) * 2;
    let mut buf = [0u8; 64];
    let mut answered = None;
    while began.elapsed() < limit && !halt.now() {
        // A send that fails (no route yet, a full buffer) is tried again at the next poll.
        let _ = client.send(b"qbench settle");
        if client.recv(&mut buf).is_ok() {
            answered = Some(began.elapsed());
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    if answered.is_none() && halt.now() {
        return Err(CalibrateError::Stopped("the link was settling"));
    }
    Ok(answered)
}
