//! Third-party programs (clients and servers): found before the first run, and each process
//! in a cgroup (v2) of its own, `qb-<8 hex>-client` or `-server`: a child that leaves the
//! process group (`setsid`, Chromium's browser, a daemonizing server) is still in it, and the
//! whole cgroup is killed and removed when the process ends. Where no cgroup can be made (not
//! root, no v2 hierarchy) the process group alone is killed, and a warning says so once.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use qbench_shaper::cgroup::{parse_mountinfo, parse_proc_cgroup};
use qbench_shaper::owner::Owner;

use crate::observe::Observing;

/// How long the kernel is given to empty a killed cgroup before its removal is tried anyway.
const EMPTIED: Duration = Duration::from_secs(2);

/// The process's own v2 cgroup, where ours go; `None` without a v2 hierarchy.
fn parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let mounts = parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").ok()?);
            let (own, _) = parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").ok()?);
            let (mount, own) = (mounts.v2?, own?);
            Some(match own.trim_start_matches('/') {
                "" => mount,
                rest => mount.join(rest),
            })
        })
        .as_deref()
}

/// `program` on `PATH` (or a path), before the first run: an executable file, as an absolute
/// path. The process runs in a directory of its own, so a relative path (or a relative
/// directory on `PATH`) is taken from qbench's, where it was checked, not from the process's.
pub(crate) fn find(program: &str) -> Option<PathBuf> {
    let runnable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        let abs = std::path::absolute(p).ok()?;
        let m = std::fs::metadata(&abs).ok()?;
        (m.is_file() && m.permissions().mode() & 0o111 != 0).then_some(abs)
    };
    if program.contains('/') {
        return runnable(Path::new(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|d| runnable(&d.join(program)))
}

/// A fresh 32-bit id: this process's, a count, and the clock's nanoseconds, mixed.
fn id() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() as u32
}

/// Says once per command that children leaving the group may outlive their run.
fn warn_once(to: &Observing, role: Role, why: &str) {
    let flag = role.flag();
    to.warn_once(
        &format!("{flag}: no cgroup"),
        &format!(
            "warning: {flag}: no cgroup for the {}'s processes ({why}); only their process \
             group is killed, so a child that leaves it (setsid) may outlive the run",
            role.name()
        ),
    );
}

/// Whose processes a cgroup holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    Client,
    Server,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Self::Client => "--client",
            Self::Server => "--server",
        }
    }
}

/// One process's cgroup: killed and removed when dropped.
pub(crate) struct ProcCgroup {
    dir: PathBuf,
    /// `cgroup.procs`, for the child to write itself into before it runs the program.
    procs: CString,
    _owner: Option<Owner>,
}

impl ProcCgroup {
    /// A fresh cgroup, or `None` (said once, to `to`) where none can be made.
    pub(crate) fn create(to: &Observing, role: Role) -> Option<Self> {
        let Some(parent) = parent() else {
            warn_once(to, role, "no cgroup v2 hierarchy");
            return None;
        };
        // A name held by a live run, or taken meanwhile, is passed over (bounded).
        let mut made = None;
        for _ in 0..16 {
            let name = format!("qb-{:08x}-{}", id(), role.name());
            // `None` where the owner files cannot be written (not root): the cgroup is ours
            // all the same.
            let owner = match Owner::claim(&name) {
                Ok(None) => continue,
                Ok(o) => o,
                Err(_) => None,
            };
            let dir = parent.join(&name);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    made = Some((dir, owner));
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    warn_once(to, role, &format!("{}: {e}", dir.display()));
                    return None;
                }
            }
        }
        let (dir, owner) = made?;
        let procs = CString::new(
            dir.join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        );
        let Ok(procs) = procs else {
            let _ = std::fs::remove_dir(&dir);
            return None;
        };
        Some(Self {
            dir,
            procs,
            _owner: owner,
        })
    }

    /// For the child, between fork and exec: joins the cgroup. Only async-signal-safe calls;
    /// a child that cannot join runs anyway, in its process group.
    pub(crate) fn joiner(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let procs = self.procs.clone();
        move || {
            // SAFETY: open/write/close on a path owned by the closure; no allocation.
            unsafe {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            Ok(())
        }
    }

    /// The CPU its processes used, living and ended (user s, sys s), from `cpu.stat`.
    pub(crate) fn cpu(&self) -> Option<(f64, f64)> {
        let stat = std::fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
        let field = |name: &str| {
            stat.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
        };
        Some((
            field("user_usec ")? as f64 / 1e6,
            field("system_usec ")? as f64 / 1e6,
        ))
    }

    pub(crate) fn procs(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGKILL to every process in it (`cgroup.kill`, or each of `cgroup.procs` on kernels
    /// before 5.14), until it is empty or `EMPTIED` has passed.
    pub(crate) fn kill(&self) {
        let killed = std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok();
        let until = Instant::now() + EMPTIED;
        loop {
            let left = self.procs();
            if left.is_empty() || Instant::now() >= until {
                return;
            }
            if !killed {
                for pid in left {
                    // SAFETY: a signal to a process of this cgroup, which only this run's
                    // client and its children joined.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for ProcCgroup {
    fn drop(&mut self) {
        self.kill();
        // The kernel lets go of a cgroup a moment after its last process exits.
        let until = Instant::now() + EMPTIED;
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < until {
            if !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
