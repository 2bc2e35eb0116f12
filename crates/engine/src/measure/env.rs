//! The environment section of the report: what machine and stacks produced the figures.

use std::collections::BTreeMap;

use qbench_core::report::env_checks::CpuClock;
use qbench_core::Environment;

const SYSCTLS: &[&str] = &[
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/rmem_default",
    "net/core/wmem_default",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/udp_mem",
];

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

pub(crate) fn collect() -> Environment {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let sysctls = SYSCTLS
        .iter()
        .filter_map(|k| read_trim(&format!("/proc/sys/{k}")).map(|v| (k.replace('/', "."), v)))
        .collect();
    let crates: BTreeMap<String, String> = env!("QBENCH_STACK_VERSIONS")
        .split(';')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Environment {
        hostname: read_trim("/proc/sys/kernel/hostname"),
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        cpu_model,
        cores: std::thread::available_parallelism().ok().map(|n| n.get()),
        sysctls,
        crates,
        tls_provider: Some(qbench_stack::crypto::PROVIDER.into()),
        rep_movsb_threshold: qbench_stack::rep_movsb::state().describe(),
        interfaces: Vec::new(),
        cpu_clock: Some(cpu_clock()),
        warnings: Vec::new(),
    }
}

/// Governors and frequency limits over every CPU's cpufreq (absent in many VMs), and the
/// clock source with whether the TSC is invariant.
fn cpu_clock() -> CpuClock {
    let mut c = CpuClock::default();
    let cpus = std::fs::read_dir("/sys/devices/system/cpu")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("cpufreq"))
        .filter(|p| p.is_dir());
    let khz = |p: &std::path::Path, f: &str| -> Option<u64> {
        std::fs::read_to_string(p.join(f)).ok()?.trim().parse().ok()
    };
    for dir in cpus {
        if let Some(g) = read_trim(&dir.join("scaling_governor").to_string_lossy()) {
            *c.governors.entry(g).or_default() += 1;
        }
        if let Some(v) = khz(&dir, "scaling_min_freq") {
            c.min_khz = Some(c.min_khz.map_or(v, |m| m.min(v)));
        }
        if let Some(v) = khz(&dir, "scaling_max_freq") {
            c.max_khz = Some(c.max_khz.map_or(v, |m| m.max(v)));
        }
    }
    c.clocksource = read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    c.tsc_invariant = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        let flags = s.lines().find(|l| l.starts_with("flags"))?;
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        Some(has("constant_tsc") && has("nonstop_tsc"))
    });
    c
}

/// The interface towards the peer, and the warnings this environment calls for, each said
/// to `to` once however many sides share it.
pub(crate) fn complete(
    env: &mut Environment,
    peer: std::net::SocketAddr,
    link: bool,
    udp: bool,
    to: &crate::observe::Observing,
) {
    env.interfaces = super::netdev::towards(peer, link).into_iter().collect();
    env.warnings = qbench_core::report::env_checks::warnings(env, udp);
    for w in &env.warnings {
        to.warn_once(w, &format!("warning: {w}"));
    }
}
