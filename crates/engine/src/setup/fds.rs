//! File descriptors for many connections: the limit is raised at start (to the hard limit);
//! a run that would still run out says so before it starts, naming what it needs.

use qbench_core::Protocol;

use crate::error::ConfigError;
use crate::plan::config::Config;

/// Descriptors besides connections: the runtime, the UDP sockets, telemetry, files.
const SPARE: u64 = 256;

/// Descriptors `cfgs` need at once: one per TCP connection on the client, and another on
/// the in-process server's side; QUIC uses one UDP socket per endpoint.
pub(crate) fn needed(cfgs: &[&Config]) -> u64 {
    let per_conn = |c: &Config| match (c.spec().proto, c.server.is_some()) {
        (Protocol::H3, _) => 0,
        (_, true) => 2,
        (_, false) => 1,
    };
    SPARE
        + cfgs
            .iter()
            .map(|c| u64::from(c.spec().connections) * per_conn(c))
            .sum::<u64>()
}

/// The soft RLIMIT_NOFILE, as raised at start.
fn soft_limit() -> std::io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Raises both limits to `need` (allowed with CAP_SYS_RESOURCE, as root, up to
/// fs.nr_open); false if the kernel says no.
fn raise_to(need: u64) -> bool {
    let lim = libc::rlimit {
        rlim_cur: need,
        rlim_max: need,
    };
    // SAFETY: setrlimit only reads the struct passed.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 }
}

/// Fails before anything starts if the connections cannot all be open at once, after
/// raising the limit if it may.
pub fn check(cfgs: &[&Config]) -> Result<(), ConfigError> {
    let need = needed(cfgs);
    let Ok((soft, hard)) = soft_limit() else {
        return Ok(());
    };
    if need <= soft || (need > hard && raise_to(need)) {
        return Ok(());
    }
    let conns: u64 = cfgs.iter().map(|c| u64::from(c.spec().connections)).sum();
    Err(ConfigError {
        flag: "--connections",
        message: format!(
            "{conns} connections need about {need} file descriptors, but RLIMIT_NOFILE is {soft} (hard limit {hard}); raise it (ulimit -n {need}) or use fewer connections"
        ),
    })
}
