//! `--client`: what a third-party client can be asked for. It fetches `--objects` once per
//! run over its own connections; what only qbench's clients do is refused by flag.

use qbench_core::spec::RunSpec;

use crate::error::{bad, ConfigError};

pub(crate) fn check(s: &RunSpec) -> Result<(), ConfigError> {
    let Some(p) = &s.client else { return Ok(()) };
    p.check(s.proto)
        .map_err(|e| bad("--client", e.to_string()))?;
    let only_ours = [
        ("--duration", s.load.is_some()),
        ("--interval", s.interval.is_some()),
        ("--video", s.video.is_some()),
        ("--page", s.page.is_some()),
        ("--0rtt", s.zero_rtt),
        ("--resume", s.resume),
        ("--proxy", s.proxy.is_some()),
        ("--link-b", s.link_b.is_some()),
        ("--client-threads", s.client_threads > 1),
        ("--shard", s.shard.is_some()),
    ];
    if s.client_cpu.is_some() {
        let probe =
            qbench_shaper::cgroup::probe().map_err(|e| bad("--client-cpu", e.to_string()))?;
        if probe.backend != qbench_core::spec::cpulimit::CgroupBackend::CgroupV1 {
            return Err(bad(
                "--client-cpu",
                format!(
                    "with --client {} needs the cgroup v1 cpu controller: under cgroup v2 the quota holds threads of qbench's process only",
                    p.name()
                ),
            ));
        }
    }
    for (flag, given) in only_ours {
        if given {
            return Err(bad(
                flag,
                format!("is for qbench's own clients, not --client {}", p.name()),
            ));
        }
    }
    if s.reuse && !matches!(p, qbench_core::client_program::ClientProgram::Chromium) {
        return Err(bad(
            "--reuse",
            format!(
                "--client {} opens its connections in each run's processes; only chromium keeps one across loads (--reuse)",
                p.name()
            ),
        ));
    }
    Ok(())
}
