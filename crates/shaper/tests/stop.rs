//! A stopping signal while a link settles or is measured ends `up` and `check` at once, with
//! the link taken down: on a link of an hour's round trip, both wait a round trip or two for
//! echoes that will not come in the test's lifetime, and a signal must not wait with them.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::needs::{require, Need};

const BIN: &str = env!("CARGO_BIN_EXE_qbench-shaper");

/// How long the test waits for a stopped process: a minute, against the hour of one round
/// trip of the link it stopped.
const STOPPED_WITHIN: Duration = Duration::from_secs(60);

fn namespaces_of(id: &str) -> Vec<String> {
    qbench_shaper::netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&format!("qb-{id}-")))
        .collect()
}

/// Takes down what a failed assertion would leave: the process, then its namespaces.
struct Held(Child, String);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        for ns in namespaces_of(&self.1) {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
    }
}

fn poll_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + STOPPED_WITHIN;
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_signal_while_an_hour_long_link_settles_or_is_measured_stops_up_and_check() {
    require!(Need::Link);
    let pid = std::process::id() & 0xfff;
    // `up` waits in the settling echo; `check`'s link drops everything up, so settling is
    // skipped and the wait is the measurement's, for the probe's stragglers.
    let cases = [
        ("up", "rtt=3600s", libc::SIGINT),
        ("check", "rtt=3600s,up.loss=100%", libc::SIGTERM),
    ];
    for (n, (cmd, spec, sig)) in cases.into_iter().enumerate() {
        let id = format!("{:x}", 0xd200_0000u32 | (pid << 4) | n as u32);
        let child = Command::new(BIN)
            .args([cmd, spec, "--id", &id])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut held = Held(child, id.clone());
        poll_until("the link's namespaces exist", || {
            namespaces_of(&id).len() == 3
        });
        // Past the build, into the waits (a signal during the build is acted on too).
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(held.0.id() as i32, sig) };
        let mut status = None;
        poll_until(&format!("`{cmd} {spec}` ends after signal {sig}"), || {
            status = held.0.try_wait().unwrap();
            status.is_some()
        });
        let status = status.unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(held.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(1), "{cmd}: {status} {err}");
        assert!(err.contains("stopped by a signal"), "{cmd}: {err}");
        assert!(
            namespaces_of(&id).is_empty(),
            "{cmd} left {:?}",
            namespaces_of(&id)
        );
    }
}
