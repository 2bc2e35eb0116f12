//! What this kernel and machine offer, found out before anything is changed.

use crate::exec::run;
use crate::plan::{Backend, Cmd, Names};

pub use qbench_core::report::link::Capabilities;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("emulating a link needs root (network namespaces, tc, nftables)")]
    NotRoot,
    #[error("`{0}` is not installed (Debian package {1})")]
    Missing(&'static str, &'static str),
    #[error("--backend netem: this kernel has no sch_netem")]
    NoNetem,
    #[error("--backend userspace needs /dev/net/tun for delay and jitter")]
    NoTun,
}

fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
        .unwrap_or(false)
}

fn netem_works() -> bool {
    // A throwaway namespace named like ours, so `cleanup` would catch it if we died here.
    let n = Names::new(&format!("{:x}", std::process::id() | 0xf000_0000));
    let ns = n.router.as_str();
    let ok = run(&Cmd {
        ns: None,
        argv: ["ip", "netns", "add", ns].map(String::from).to_vec(),
        stdin: None,
    })
    .is_ok()
        && run(&Cmd {
            ns: None,
            argv: [
                "ip", "-n", ns, "link", "add", "qb-pa", "type", "veth", "peer", "name", "qb-pb",
            ]
            .map(String::from)
            .to_vec(),
            stdin: None,
        })
        .is_ok()
        && run(&Cmd {
            ns: None,
            argv: [
                "tc", "-n", ns, "qdisc", "add", "dev", "qb-pa", "root", "netem", "delay", "1ms",
            ]
            .map(String::from)
            .to_vec(),
            stdin: None,
        })
        .is_ok();
    let _ = run(&Cmd {
        ns: None,
        argv: ["ip", "netns", "del", ns].map(String::from).to_vec(),
        stdin: None,
    });
    ok
}

pub fn probe() -> Capabilities {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let (ip, tc) = (on_path("ip"), on_path("tc"));
    Capabilities {
        root,
        ip,
        tc,
        nft: on_path("nft"),
        ethtool: on_path("ethtool"),
        tun: std::path::Path::new("/dev/net/tun").exists(),
        netem: root && ip && tc && netem_works(),
    }
}

/// Fails before anything is changed when the link cannot be built.
pub fn check(caps: &Capabilities, backend: Backend, needs_ethtool: bool) -> Result<(), ProbeError> {
    if !caps.root {
        return Err(ProbeError::NotRoot);
    }
    if !caps.ip {
        return Err(ProbeError::Missing("ip", "iproute2"));
    }
    if !caps.tc {
        return Err(ProbeError::Missing("tc", "iproute2"));
    }
    if needs_ethtool && !caps.ethtool {
        return Err(ProbeError::Missing("ethtool", "ethtool"));
    }
    match backend {
        Backend::Netem if !caps.netem => Err(ProbeError::NoNetem),
        Backend::Userspace if !caps.tun => Err(ProbeError::NoTun),
        _ => Ok(()),
    }
}

/// netem where the kernel has it.
pub fn auto_backend(caps: &Capabilities) -> Backend {
    if caps.netem {
        Backend::Netem
    } else {
        Backend::Userspace
    }
}
