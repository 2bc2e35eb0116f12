//! The environment section of the report: what machine and stacks produced the figures.

use std::collections::BTreeMap;

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

pub fn collect() -> Environment {
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
        rep_movsb_threshold: qbench_stack::rep_movsb::state().describe(),
    }
}
