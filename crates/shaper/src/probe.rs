//! What this kernel and machine offer, found out before anything is changed.

use qbench_core::spec::link::LinkSpec;

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
    #[error("--backend edt: this kernel has no sch_fq (CONFIG_NET_SCH_FQ)")]
    NoFq,
    #[error(transparent)]
    Edt(#[from] crate::edt::EdtError),
    #[error("--backend edt: tc cannot load qbench's BPF program on an egress hook (needs clsact, cls_bpf and a BPF-enabled kernel)")]
    NoTcBpf,
    #[error("--backend edt drops packets for loss with nftables: `nft` is not installed (Debian package nftables)")]
    NoNftForLoss,
}

fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
        .unwrap_or(false)
}

fn ok(argv: &[&str]) -> bool {
    run(&Cmd {
        ns: None,
        argv: argv.iter().map(|a| a.to_string()).collect(),
        stdin: None,
    })
    .is_ok()
}

/// The link id of the throwaway namespace process `pid` probes the kernel in: named like a
/// link's, so that `cleanup` would catch it if the prober died, and apart from every link a
/// run builds (whose ids never have the top four bits set).
pub fn probe_id(pid: u32) -> String {
    format!("{:x}", pid | 0xf000_0000)
}

/// What the kernel's tc can do: (netem, fq, qbench's edt program through tc BPF), each tried
/// on a veth in a throwaway namespace.
fn kernel() -> (bool, bool, bool) {
    // One probe at a time in a process: its namespace's name is the process's own.
    static PROBING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = PROBING.lock().unwrap_or_else(|e| e.into_inner());
    let n = Names::new(&probe_id(std::process::id()));
    let ns = n.router.as_str();
    // Owned while it lives, so that a `cleanup` meanwhile does not pull it from under us. A
    // claim refused while another process looks at the lock for an instant is tried again;
    // a name held for longer is not ours to build or delete.
    let mut owner = crate::owner::Owner::claim(&crate::owner::link(&n.id));
    for _ in 0..50 {
        if !matches!(owner, Ok(None)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        owner = crate::owner::Owner::claim(&crate::owner::link(&n.id));
    }
    if matches!(owner, Ok(None)) {
        return (false, false, false);
    }
    let mut found = (false, false, false);
    if !ok(&["ip", "netns", "add", ns]) {
        return found;
    }
    if ok(&[
        "ip", "-n", ns, "link", "add", "qb-pa", "type", "veth", "peer", "name", "qb-pb",
    ]) {
        let qdisc = |kind: &[&str]| {
            let mut argv = vec!["tc", "-n", ns, "qdisc", "replace", "dev", "qb-pa", "root"];
            argv.extend(kind);
            ok(&argv)
        };
        found.0 = qdisc(&["netem", "delay", "1ms"]);
        found.1 = qdisc(&["fq"]);
        found.2 = tc_bpf(ns);
    }
    let _ = ok(&["ip", "netns", "del", ns]);
    drop(owner);
    found
}

/// Loads the edt program (unpatched: it only has to pass the verifier) on `qb-pa`'s egress.
fn tc_bpf(ns: &str) -> bool {
    let Ok(object) = crate::edt::object() else {
        return false;
    };
    let Ok(dir) = tempfile::Builder::new().prefix("qbench-probe-").tempdir() else {
        return false;
    };
    let path = dir.path().join("probe.o");
    if std::fs::write(&path, object).is_err() {
        return false;
    }
    let obj = path.display().to_string();
    ok(&["tc", "-n", ns, "qdisc", "add", "dev", "qb-pa", "clsact"])
        && ok(&[
            "tc", "-n", ns, "filter", "add", "dev", "qb-pa", "egress", "bpf", "da", "obj", &obj,
            "sec", "tc",
        ])
}

pub fn probe() -> Capabilities {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let (ip, tc) = (on_path("ip"), on_path("tc"));
    let (netem, fq, tc_bpf) = if root && ip && tc {
        kernel()
    } else {
        (false, false, false)
    };
    Capabilities {
        root,
        ip,
        tc,
        nft: on_path("nft"),
        ethtool: on_path("ethtool"),
        tun: std::path::Path::new("/dev/net/tun").exists(),
        netem,
        fq,
        tc_bpf,
    }
}

/// Fails before anything is changed when the link cannot be built.
pub fn check(
    caps: &Capabilities,
    backend: Backend,
    link: &LinkSpec,
    needs_ethtool: bool,
) -> Result<(), ProbeError> {
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
        Backend::Edt => {
            crate::edt::object()?;
            crate::edt::supports(link)?;
            if !caps.fq {
                Err(ProbeError::NoFq)
            } else if (link.up.loss > 0.0 || link.down.loss > 0.0) && !caps.nft {
                Err(ProbeError::NoNftForLoss)
            } else if !caps.tc_bpf {
                Err(ProbeError::NoTcBpf)
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// The edt backend for a fixed rate from `edt::AUTO_FROM` up where the kernel has what it
/// needs, else netem where the kernel has it.
pub fn auto_backend(caps: &Capabilities, link: &LinkSpec) -> Backend {
    let loss = link.up.loss > 0.0 || link.down.loss > 0.0;
    if caps.fq && caps.tc_bpf && crate::edt::suits_auto(link) && (caps.nft || !loss) {
        Backend::Edt
    } else if caps.netem {
        Backend::Netem
    } else {
        Backend::Userspace
    }
}
