//! What else in the machine decides a result, beside the sysctls: the interfaces the traffic
//! crossed, the CPU frequency governor, the clock source; and a one-line warning, naming the
//! fix, for each setting that limits a run.

use serde::{Deserialize, Serialize};

use crate::report::Environment;
use crate::wire::UDP_BUFFER;

/// An interface the run's packets crossed, as the client's network namespace sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InterfaceInfo {
    pub name: String,
    /// Why it is the one: `loopback` (an in-process server), `route` (the route to a remote
    /// target), `link` (the emulated link's client end).
    pub role: String,
    pub mtu: Option<u32>,
    /// Segmentation and receive offloads (`ethtool -k`): GSO and TSO batch what a sender
    /// writes, GRO what a receiver reads. `None` where the kernel would not say.
    pub gso: Option<bool>,
    pub tso: Option<bool>,
    pub gro: Option<bool>,
    /// The root queueing discipline (`noqueue`, `fq_codel`, `tbf`...).
    pub qdisc: Option<String>,
}

/// The machine's CPU frequency and clock, where the kernel exposes them (virtual machines
/// often have no cpufreq).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuClock {
    /// Governors with how many CPUs use each: `{"performance": 16}`.
    #[serde(default)]
    pub governors: std::collections::BTreeMap<String, u32>,
    /// The lowest and highest frequency limits over CPUs, kHz.
    pub min_khz: Option<u64>,
    pub max_khz: Option<u64>,
    /// The kernel's clock source (`tsc`, `kvm-clock`, `hpet`...).
    pub clocksource: Option<String>,
    /// The CPU says its TSC runs at a constant rate and does not stop in idle states
    /// (`constant_tsc` and `nonstop_tsc`).
    pub tsc_invariant: Option<bool>,
}

/// Clock sources read in tens of nanoseconds, without a trap to the hypervisor or a slow bus.
const FAST_CLOCKS: &[&str] = &[
    "tsc",
    "kvm-clock",
    "arch_sys_counter",
    "hyperv_clocksource_tsc_page",
];

fn sysctl_bytes(env: &Environment, key: &str) -> Option<u64> {
    env.sysctls.get(key)?.trim().parse().ok()
}

/// One line per setting that limits a run like this one, naming the fix. `udp`: the run
/// uses QUIC, whose sockets ask for `UDP_BUFFER` bytes each way.
pub fn warnings(env: &Environment, udp: bool) -> Vec<String> {
    let mut out = Vec::new();
    if udp {
        for (key, what) in [
            ("net.core.rmem_max", "receive"),
            ("net.core.wmem_max", "send"),
        ] {
            if let Some(v) = sysctl_bytes(env, key).filter(|v| *v < UDP_BUFFER as u64) {
                out.push(format!(
                    "{key} is {v}, below the {} KiB {what} buffer qbench asks for each UDP socket: \
                     QUIC may drop datagrams at high rates (sysctl -w {key}={UDP_BUFFER})",
                    UDP_BUFFER / 1024
                ));
            }
        }
    }
    for i in &env.interfaces {
        // The emulated link's offloads are what --offloads chose.
        if i.role == "link" {
            continue;
        }
        if i.gso == Some(false) {
            out.push(format!(
                "GSO is off on {}: every packet goes through the sender's stack on its own \
                 (ethtool -K {} gso on)",
                i.name, i.name
            ));
        }
        if i.gro == Some(false) {
            out.push(format!(
                "GRO is off on {}: every packet goes up the receiver's stack on its own \
                 (ethtool -K {} gro on)",
                i.name, i.name
            ));
        }
    }
    if let Some(c) = &env.cpu_clock {
        if let Some(n) = c.governors.get("powersave") {
            out.push(format!(
                "{n} CPU(s) run the powersave frequency governor: timings vary with the \
                 clock (cpupower frequency-set -g performance)"
            ));
        }
        if let Some(src) = c
            .clocksource
            .as_deref()
            .filter(|s| !FAST_CLOCKS.contains(s))
        {
            out.push(format!(
                "the clock source is {src}: every timestamp costs microseconds \
                 (echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource, \
                 where the TSC is invariant)"
            ));
        }
        if c.clocksource.as_deref() == Some("tsc") && c.tsc_invariant == Some(false) {
            out.push(
                "the clock source is a TSC that is not invariant: its rate may change with the \
                 CPU's frequency (boot with a stable clock source, e.g. hpet, to check)"
                    .into(),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        let mut e = Environment::default();
        e.sysctls
            .insert("net.core.rmem_max".into(), "4194304".into());
        e.sysctls
            .insert("net.core.wmem_max".into(), "4194304".into());
        e.interfaces.push(InterfaceInfo {
            name: "lo".into(),
            role: "loopback".into(),
            mtu: Some(65536),
            gso: Some(true),
            tso: Some(true),
            gro: Some(true),
            qdisc: Some("noqueue".into()),
        });
        e.cpu_clock = Some(CpuClock {
            clocksource: Some("tsc".into()),
            tsc_invariant: Some(true),
            ..CpuClock::default()
        });
        e
    }

    #[test]
    fn a_good_machine_has_nothing_to_say() {
        assert!(warnings(&env(), true).is_empty());
        assert!(
            warnings(&Environment::default(), true).is_empty(),
            "nothing known, nothing said"
        );
    }

    #[test]
    fn each_limit_is_one_line_naming_its_fix() {
        let mut e = env();
        e.sysctls
            .insert("net.core.rmem_max".into(), "212992".into());
        e.interfaces[0].gso = Some(false);
        let c = e.cpu_clock.as_mut().unwrap();
        c.governors.insert("powersave".into(), 2);
        c.governors.insert("performance".into(), 14);
        let w = warnings(&e, true);
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(
            w[0].starts_with("net.core.rmem_max is 212992, below the 4096 KiB receive"),
            "{}",
            w[0]
        );
        assert!(
            w[0].ends_with("(sysctl -w net.core.rmem_max=4194304)"),
            "{}",
            w[0]
        );
        assert!(w[1].starts_with("GSO is off on lo") && w[1].ends_with("(ethtool -K lo gso on)"));
        assert!(w[2].starts_with("2 CPU(s) run the powersave"), "{}", w[2]);
        assert!(w.iter().all(|l| !l.contains('\n')));
        // TCP alone does not use the UDP buffers.
        assert_eq!(warnings(&e, false).len(), 2);
    }

    #[test]
    fn slow_or_unstable_clocks_and_chosen_link_offloads() {
        let mut e = env();
        e.cpu_clock.as_mut().unwrap().clocksource = Some("hpet".into());
        let w = warnings(&e, false);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("the clock source is hpet"), "{}", w[0]);
        let mut e = env();
        e.cpu_clock.as_mut().unwrap().tsc_invariant = Some(false);
        assert!(warnings(&e, false)[0].contains("not invariant"));
        let mut e = env();
        e.interfaces[0].role = "link".into();
        e.interfaces[0].gro = Some(false);
        assert!(
            warnings(&e, false).is_empty(),
            "--offloads off is the user's choice"
        );
    }
}
