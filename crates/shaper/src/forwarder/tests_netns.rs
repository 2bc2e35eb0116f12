//! The network namespaces the end-to-end tests run in: each test builds its own
//! client/router/server namespaces named `qb-fwdtest-<pid>-<n>*` with addresses from
//! 198.18.0.0/15 only, and deletes them on drop, even on failure.

use std::net::Ipv4Addr;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicU32;

use super::*;

fn output(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", args[0]))
}

fn run(args: &[&str]) {
    let out = output(args);
    assert!(
        out.status.success(),
        "`{}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Moves the calling thread into a named namespace; threads it spawns inherit it.
fn enter(ns: &str) -> io::Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{ns}"))?;
    // SAFETY: setns on a valid namespace fd changes only the calling thread's namespace.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` on a fresh thread inside namespace `ns`.
pub(super) fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        enter(&ns).unwrap_or_else(|e| panic!("entering {ns}: {e}"));
        f()
    })
}

pub(super) struct Netns {
    pub(super) name: String,
}

impl Netns {
    fn create(name: String) -> Self {
        run(&["ip", "netns", "add", &name]);
        Self { name }
    }

    pub(super) fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", self.name.as_str()];
        v.extend_from_slice(args);
        run(&v);
    }

    pub(super) fn sysctl(&self, settings: &[&str]) {
        let mut v = vec!["ip", "netns", "exec", self.name.as_str(), "sysctl", "-qw"];
        v.extend_from_slice(settings);
        run(&v);
    }

    pub(super) fn exec(&self, args: &[&str]) -> Output {
        let mut v = vec!["ip", "netns", "exec", self.name.as_str()];
        v.extend_from_slice(args);
        output(&v)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stderr(Stdio::null())
            .status();
    }
}

pub(super) const A_ADDR: &str = "198.18.1.2";
pub(super) const B_ADDR: &str = "198.18.2.2";
pub(super) const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
pub(super) const A_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);

/// Client A, router R, server B; R forwards between two veth pairs. Dropping it deletes
/// all three namespaces (the fields drop in order, each deleting its own).
pub(super) struct Topo {
    pub(super) a: Netns,
    pub(super) r: Netns,
    pub(super) b: Netns,
}

static NEXT_TOPO: AtomicU32 = AtomicU32::new(0);
static SWEEP: std::sync::Once = std::sync::Once::new();

/// Deletes namespaces left by earlier test processes that were killed before their guards
/// ran (`qb-fwdtest-<pid>-...` whose pid is gone); never touches a live run's.
fn sweep_stale_namespaces() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("qb-fwdtest-")
            .and_then(|r| r.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            drop(Netns { name });
        }
    }
}

impl Topo {
    pub(super) fn new() -> Self {
        SWEEP.call_once(sweep_stale_namespaces);
        let id = NEXT_TOPO.fetch_add(1, Ordering::Relaxed);
        let base = format!("qb-fwdtest-{}-{id}", std::process::id());
        let topo = Self {
            a: Netns::create(format!("{base}a")),
            r: Netns::create(format!("{base}r")),
            b: Netns::create(format!("{base}b")),
        };
        topo.wire();
        topo
    }

    pub(super) fn names(&self) -> [String; 3] {
        [
            self.a.name.clone(),
            self.r.name.clone(),
            self.b.name.clone(),
        ]
    }

    fn wire(&self) {
        let (a, r, b) = (&self.a, &self.r, &self.b);
        for ns in [a, r, b] {
            // IPv6 chatter (DAD, router solicitations) would only add noise to counts.
            ns.sysctl(&[
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
            ns.ip(&["link", "set", "lo", "up"]);
        }
        a.ip(&[
            "link", "add", "a-r", "type", "veth", "peer", "name", "r-a", "netns", &r.name,
        ]);
        r.ip(&[
            "link", "add", "r-b", "type", "veth", "peer", "name", "b-r", "netns", &b.name,
        ]);
        a.ip(&["addr", "add", "198.18.1.2/24", "dev", "a-r"]);
        r.ip(&["addr", "add", "198.18.1.1/24", "dev", "r-a"]);
        r.ip(&["addr", "add", "198.18.2.1/24", "dev", "r-b"]);
        b.ip(&["addr", "add", "198.18.2.2/24", "dev", "b-r"]);
        for (ns, dev) in [(a, "a-r"), (r, "r-a"), (r, "r-b"), (b, "b-r")] {
            ns.ip(&["link", "set", dev, "up"]);
        }
        a.ip(&["route", "add", "default", "via", "198.18.1.1"]);
        b.ip(&["route", "add", "default", "via", "198.18.2.1"]);
        // `default` first so the TUNs created later inherit rp_filter=0: packets written
        // back into a TUN carry a source that the reverse path would put on a veth.
        r.sysctl(&[
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv4.conf.r-a.rp_filter=0",
            "net.ipv4.conf.r-b.rp_filter=0",
            "net.ipv4.ip_forward=1",
        ]);
    }

    /// Starts one forwarder per direction in R and routes each direction through its TUN.
    pub(super) fn with_forwarders(
        &self,
        up: Impairment,
        down: Impairment,
    ) -> (Forwarder, Forwarder) {
        let fw_up = start_forwarder(&self.r.name, "fwup", up, true);
        let fw_dn = start_forwarder(&self.r.name, "fwdn", down, true);
        self.route_through_tuns(10_000);
        (fw_up, fw_dn)
    }

    /// The router side of the delay path: each direction's packets into its TUN by policy
    /// routing; written back, they arrive with iif = the TUN and use the main table.
    pub(super) fn route_through_tuns(&self, txqueuelen: u32) {
        let r = &self.r;
        for (tun, from, table) in [("fwup", "r-a", "100"), ("fwdn", "r-b", "101")] {
            r.sysctl(&[
                &format!("net.ipv6.conf.{tun}.disable_ipv6=1"),
                &format!("net.ipv4.conf.{tun}.rp_filter=0"),
                &format!("net.ipv4.conf.{tun}.forwarding=1"),
            ]);
            r.ip(&["link", "set", tun, "txqueuelen", &txqueuelen.to_string()]);
            r.ip(&["link", "set", tun, "up"]);
            r.ip(&["rule", "add", "iif", from, "lookup", table]);
            r.ip(&["route", "add", "default", "dev", tun, "table", table]);
        }
    }

    pub(super) fn ping(&self, args: &[&str]) -> String {
        let mut v = vec!["ping", "-n"];
        v.extend_from_slice(args);
        v.push(B_ADDR);
        String::from_utf8_lossy(&self.a.exec(&v).stdout).into_owned()
    }
}

pub(super) fn start_forwarder(ns: &str, tun: &str, imp: Impairment, vnet_hdr: bool) -> Forwarder {
    let tun_name = tun.to_owned();
    in_ns(ns, move || {
        let t = Tun::open(&tun_name, vnet_hdr)?;
        Forwarder::start(t, imp)
    })
    .join()
    .expect("forwarder start thread panicked")
    .unwrap_or_else(|e| panic!("starting forwarder on {tun}: {e}"))
}

pub(super) fn rtts_ms(ping_out: &str) -> Vec<f64> {
    ping_out
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next())
        .filter_map(|t| t.parse().ok())
        .collect()
}

pub(super) fn received(ping_out: &str) -> Option<u32> {
    let line = ping_out
        .lines()
        .find(|l| l.contains("packets transmitted"))?;
    let field = line.split(',').find(|f| f.contains("received"))?;
    field.split_whitespace().next()?.parse().ok()
}
