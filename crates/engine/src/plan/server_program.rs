//! `--server`: what a third-party server can be asked for. It serves the workload's objects
//! behind the link in qbench-server's place; what only qbench-server does is refused by flag,
//! before the first run.

use qbench_core::server_program::ServerProgram;
use qbench_core::spec::{RunSpec, Target};

use crate::error::{bad, ConfigError};

pub(crate) fn check(s: &RunSpec, target: &Target) -> Result<(), ConfigError> {
    let Some(p) = &s.server else { return Ok(()) };
    if *target != Target::InProcess {
        return Err(bad(
            "--server",
            "starts a server program in qbench-server's place; with --target or --url the server is already running",
        ));
    }
    p.check(s.proto)
        .map_err(|e| bad("--server", e.to_string()))?;
    if s.objects.is_none() {
        return Err(bad(
            "--server",
            "serves the objects of --objects; --video and --page need qbench-server's routes",
        ));
    }
    let only_ours = [
        ("--video", s.video.is_some()),
        ("--page", s.page.is_some()),
        ("--proxy", s.proxy.is_some()),
        ("--server-cpu", s.server_cpu.is_some()),
        ("--cwnd-cap", s.cwnd_cap.is_some()),
        ("--initial-cwnd", s.initial_cwnd.is_some()),
        ("--reorder-threshold", s.reorder_threshold.is_some()),
        (
            "--reorder-time-threshold",
            s.reorder_time_threshold.is_some(),
        ),
        ("--shard", s.shard.is_some()),
    ];
    for (flag, given) in only_ours {
        if given {
            return Err(bad(
                flag,
                format!("applies to qbench-server, not --server {}", p.name()),
            ));
        }
    }
    // A TCP server's is its namespace's, which qbench sets behind a link; of the QUIC
    // servers only ngtcp2 takes one.
    let takes_cc = match s.proto.is_quic() {
        true => matches!(p, ServerProgram::Ngtcp2),
        false => s.link.is_some(),
    };
    if s.cc.is_some() && !takes_cc {
        let why = match s.proto.is_quic() {
            true => format!(
                "--server {} chooses its own QUIC congestion control (of the h3 servers, only ngtcp2 takes --cc)",
                p.name()
            ),
            false => "sets a TCP server's congestion control in the server's namespace, which needs --link (qbench never writes the host's sysctls)".to_string(),
        };
        return Err(bad("--cc", why));
    }
    Ok(())
}
