//! What a test needs from the machine beyond Rust, declared at its top:
//!
//! ```text
//! require!(Need::Root, Need::Tool("caddy"));
//! ```
//!
//! A laptop often lacks root and some of the third-party peers, so a test that needs one that
//! is missing prints one line and passes:
//!
//! ```text
//! skipped caddy_interop::caddy_serves_files_over_h1_h2_h3: needs `caddy` (the README's test command installs it)
//! ```
//!
//! The line is written to the process's stderr, past the test harness's capture, so that a
//! plain `cargo test` shows it. With `CI` set to `true` or `1` the test fails with that line
//! instead: CI runs as root with everything installed, and a skip there would hide a test.
//!
//! `QBENCH_TEST_WITHOUT` names prerequisites (comma-separated) to treat as missing even when
//! present, which is how the skip path is seen on a machine that has everything:
//! `CI= QBENCH_TEST_WITHOUT=root,caddy,go cargo test`. A name is `root`, a program's (`caddy`,
//! `go`, `ip`), a Python module's (`playwright`; `python3` hides every module), a TCP
//! congestion control's (`bbr`), `cgroup` or `link`.
//!
//! The integration tests of every crate use it (`qbench-testkit` is a dev-dependency of each).

pub mod marks;
pub mod others;

/// Taken by this crate's unit tests that fork and those that hold an owner lock: a child
/// forked while a lock is held shares it until it execs, and a test that lets go of its lock
/// must see it free.
#[cfg(test)]
static FORK_TURN: Mutex<()> = Mutex::new(());

use std::io::Write as _;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};

/// Where a missing program or module comes from.
const INSTALL: &str = "the README's test command installs it";

/// One thing a test needs from the machine.
#[derive(Clone, Copy, Debug)]
pub enum Need {
    /// Effective user id 0: network namespaces, cgroups, device nodes, packet capture, another
    /// user's id for a child.
    Root,
    /// A program, found as `which` finds it.
    Tool(&'static str),
    /// A module python3 imports.
    PyModule(&'static str),
    /// A cgroup cpu controller, for `--client-cpu`. qbench creates its cgroup there, which
    /// takes root too (or a delegated cgroup, which no test looks for).
    CgroupCpu,
    /// A TCP congestion control this user may set on a socket: root any the kernel has, others
    /// those in net.ipv4.tcp_allowed_congestion_control.
    TcpCc(&'static str),
    /// An emulated link (`--link`): namespaces and qdiscs as root, with iproute2's `ip` and `tc`
    /// and nftables' `nft` (which drops packets for `loss=`).
    Link,
}

impl Need {
    /// The names QBENCH_TEST_WITHOUT knows it by.
    fn names(self) -> Vec<&'static str> {
        match self {
            Self::Root => vec!["root"],
            Self::Tool(t) => vec![t],
            Self::PyModule(m) => vec![m, "python3"],
            Self::CgroupCpu => vec!["cgroup"],
            Self::TcpCc(cc) => vec![cc],
            Self::Link => vec!["link"],
        }
    }

    /// `what (how to get it)` if it is missing here or hidden.
    fn lacking(self, hidden: &[String]) -> Option<String> {
        let what = match self {
            Self::Root => "root".to_string(),
            Self::Tool(t) => format!("`{t}`"),
            Self::PyModule(m) => format!("python3's {m} module"),
            Self::CgroupCpu => "a cgroup cpu controller".to_string(),
            Self::TcpCc(cc) => format!("TCP congestion control {cc}"),
            Self::Link => "an emulated link".to_string(),
        };
        if self.names().iter().any(|n| hidden.iter().any(|h| h == n)) {
            return Some(format!("{what} (QBENCH_TEST_WITHOUT hides it)"));
        }
        let how = match self {
            Self::Link => {
                let parts = [
                    Self::Root,
                    Self::Tool("ip"),
                    Self::Tool("tc"),
                    Self::Tool("nft"),
                ];
                return parts.into_iter().find_map(|p| p.lacking(hidden));
            }
            // SAFETY: geteuid(2) only reads this process's user id.
            Self::Root if unsafe { libc::geteuid() } != 0 => "run the tests as root, as CI does",
            Self::Tool(t) if which(t).is_none() => INSTALL,
            Self::PyModule(m) if !imports(m) => INSTALL,
            Self::CgroupCpu => match qbench_shaper::cgroup::probe() {
                Ok(_) => return None,
                Err(e) => return Some(format!("{what} ({e})")),
            },
            Self::TcpCc(cc) if !listed("available", cc) => {
                return Some(format!(
                    "{what} (load the kernel's module: modprobe tcp_{cc})"
                ));
            }
            Self::TcpCc(cc) if !listed("allowed", cc) && Self::Root.lacking(hidden).is_some() => {
                "run the tests as root, as CI does, or list it in \
                 net.ipv4.tcp_allowed_congestion_control"
            }
            _ => return None,
        };
        Some(format!("{what} ({how})"))
    }
}

/// Whether every one of `needs` is here. If one is not, says which on one line to stderr and
/// returns false, for the test to return at once; under CI it panics with that line.
#[track_caller]
pub fn met(needs: &[Need]) -> bool {
    let hidden: Vec<String> = std::env::var("QBENCH_TEST_WITHOUT")
        .unwrap_or_default()
        .split(',')
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    let Some(lacking) = needs.iter().find_map(|n| n.lacking(&hidden)) else {
        return true;
    };
    let line = format!("{}: needs {lacking}", who(Location::caller()));
    if matches!(std::env::var("CI").as_deref(), Ok("true" | "1")) {
        panic!("{line}; CI is set, where nothing may be skipped");
    }
    let _ = writeln!(std::io::stderr(), "skipped {line}");
    false
}

/// Returns from the test at once unless every one of the prerequisites is met (see `met`).
/// A test that needs root, a link or a cgroup then holds the machine (see `hold`) until it
/// ends.
#[macro_export]
macro_rules! require {
    ($($need:expr),+ $(,)?) => {
        let _machine = if $crate::met(&[$($need),+]) {
            $crate::hold(&[$($need),+])
        } else {
            return;
        };
    };
}

static MACHINE: Mutex<()> = Mutex::new(());

/// The machine, held by one test at a time among those that change it or measure it whole.
/// A crate's integration tests are one binary whose tests run in parallel threads: a test that
/// builds namespaces, qdiscs or cgroups, or looks for ones left behind, or times a link,
/// must not see another's. The hold is also a lock on a file (`flock`), so that the test
/// binaries of two suites run at once on one host (two CI jobs, `scripts/ci/concurrent.sh`)
/// take turns in the same way; one that dies lets go of it with its last descriptor.
#[must_use = "the machine is held only while the guard lives"]
pub struct Held(#[allow(dead_code)] Option<(MutexGuard<'static, ()>, Option<std::fs::File>)>);

/// Where the test binaries of every suite on this host take turns: the same path for every
/// user, since the namespaces, qdiscs and cgroups they change are the host's.
pub const HOST_LOCK: &str = "/tmp/qbench-testkit-machine.lock";

/// The host-wide lock, or `None` when its file cannot be opened (then the tests of one binary
/// still take turns among themselves).
fn host_lock() -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let open = |create: bool| {
        let mut o = std::fs::OpenOptions::new();
        if create {
            o.create(true).append(true).mode(0o666);
        } else {
            // Another user's file: a lock needs no write access.
            o.read(true);
        }
        o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(HOST_LOCK)
    };
    let file = open(true).or_else(|_| open(false)).ok()?;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Some(file);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}

/// Holds the machine, for a test that looks at it whole (namespaces left behind, say)
/// without needing root itself.
pub fn machine() -> Held {
    hold(&[Need::Root])
}

/// Holds the machine if one of `needs` changes it (root, a link, a cgroup); otherwise holds
/// nothing.
pub fn hold(needs: &[Need]) -> Held {
    let whole = needs
        .iter()
        .any(|n| matches!(n, Need::Root | Need::Link | Need::CgroupCpu));
    Held(whole.then(|| {
        let local = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
        (local, host_lock())
    }))
}

/// `FILE::TEST` (the harness names each test's thread after it), or `FILE:LINE` of the guard.
fn who(at: &Location<'_>) -> String {
    let file = Path::new(at.file())
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    match std::thread::current().name() {
        Some(test) if test != "main" => format!("{file}::{test}"),
        _ => format!("{file}:{}", at.line()),
    }
}

/// Whether net.ipv4.tcp_{which}_congestion_control lists `cc`.
fn listed(which: &str, cc: &str) -> bool {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/tcp_{which}_congestion_control"))
        .is_ok_and(|l| l.split_whitespace().any(|a| a == cc))
}

fn imports(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A program on PATH, or in the sbin directories where Debian puts daemons (nginx, sshd).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}
