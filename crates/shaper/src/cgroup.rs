//! A CPU quota for some threads of this process: a `qb-<hex>-cpu` cgroup under the process's
//! own, cgroup v2 `cpu.max` on a threaded child where v2 has the cpu controller, else cgroup
//! v1 `cpu.cfs_quota_us`. Threads, not the process, are moved in, so that an in-process server
//! beside the client keeps its full CPU. Dropping the guard moves them back and removes it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::cleanup::{Cleaned, Scope};
use qbench_core::spec::cpulimit::{period_us, quota_us, CgroupBackend, Throttling, PERIOD_US};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no cgroup cpu controller here: {0}")]
    NoController(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Where the cgroup hierarchies are mounted (`/proc/self/mountinfo`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Mounts {
    pub v2: Option<PathBuf>,
    /// The v1 hierarchy the `cpu` controller is bound to.
    pub v1_cpu: Option<PathBuf>,
}

/// Mount points as mountinfo writes them: space, tab, newline and backslash in octal.
fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(char::from(c));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

pub fn parse_mountinfo(text: &str) -> Mounts {
    let mut m = Mounts::default();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(point) = left.split_whitespace().nth(4) else {
            continue;
        };
        let mut r = right.split_whitespace();
        let (fstype, options) = (r.next(), r.nth(1).unwrap_or(""));
        match fstype {
            Some("cgroup2") if m.v2.is_none() => m.v2 = Some(unescape(point).into()),
            Some("cgroup") if m.v1_cpu.is_none() && options.split(',').any(|o| o == "cpu") => {
                m.v1_cpu = Some(unescape(point).into());
            }
            _ => {}
        }
    }
    m
}

/// The process's own cgroups (`/proc/self/cgroup`): the v2 path and the v1 `cpu` one.
pub fn parse_proc_cgroup(text: &str) -> (Option<String>, Option<String>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && ctrl.is_empty() {
            v2 = Some(path.to_string());
        } else if ctrl.split(',').any(|c| c == "cpu") {
            v1 = Some(path.to_string());
        }
    }
    (v2, v1)
}

/// Where a quota can be set, found without changing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub backend: CgroupBackend,
    /// The process's own cgroup directory: ours goes beneath it, threads go back to it.
    pub parent: PathBuf,
}

/// The cgroup under the mount point `mount` at the process's `path` in that hierarchy.
fn under(mount: &Path, path: &str) -> PathBuf {
    match path.trim_start_matches('/') {
        "" => mount.to_path_buf(),
        rest => mount.join(rest),
    }
}

/// v2 where the process's cgroup is offered the cpu controller, else v1's `cpu` hierarchy.
pub fn probe() -> Result<Probe, CgroupError> {
    let read = |p: &str| fs::read_to_string(p).map_err(io(Path::new(p)));
    let mounts = parse_mountinfo(&read("/proc/self/mountinfo")?);
    let own = parse_proc_cgroup(&read("/proc/self/cgroup")?);
    choose(
        &mounts,
        own,
        |dir| fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default(),
        threaded_blocker,
    )
}

/// Why the kernel would refuse a threaded child under `parent` (EOPNOTSUPP): a child cgroup
/// of its own that holds processes and is not threaded. (Domain controllers enabled for the
/// children cannot be the reason: the kernel keeps processes out of such a cgroup, and the
/// mixable root, which has no `cgroup.type`, allows both.)
fn threaded_blocker(parent: &Path) -> Option<String> {
    if !parent.join("cgroup.type").exists() {
        return None;
    }
    let read = |p: PathBuf| fs::read_to_string(p).unwrap_or_default();
    let children = fs::read_dir(parent).ok()?;
    for child in children
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
    {
        let dir = child.path();
        let threaded = read(dir.join("cgroup.type")).trim() == "threaded";
        let populated = read(dir.join("cgroup.events"))
            .lines()
            .any(|l| l.trim() == "populated 1");
        if populated && !threaded {
            return Some(format!(
                "{} has processes in a child cgroup of its own ({}), beside which the kernel allows no threaded one",
                parent.display(),
                dir.display()
            ));
        }
    }
    None
}

/// The choice `probe` makes, given what it read; `controllers` reads a v2 cgroup's
/// `cgroup.controllers`, `blocker` says why a threaded child cannot go under it, if it cannot.
pub fn choose(
    mounts: &Mounts,
    (v2_path, v1_path): (Option<String>, Option<String>),
    controllers: impl Fn(&Path) -> String,
    blocker: impl Fn(&Path) -> Option<String>,
) -> Result<Probe, CgroupError> {
    let mut why = Vec::new();
    match (&mounts.v2, &v2_path) {
        (Some(mount), Some(path)) => {
            let parent = under(mount, path);
            if !controllers(&parent).split_whitespace().any(|c| c == "cpu") {
                why.push(format!(
                    "cgroup v2 does not offer cpu to {}",
                    parent.display()
                ));
            } else if let Some(reason) = blocker(&parent) {
                why.push(format!(
                    "cgroup v2: {reason}; run qbench from a leaf cgroup"
                ));
            } else {
                return Ok(Probe {
                    backend: CgroupBackend::CgroupV2,
                    parent,
                });
            }
        }
        _ => why.push("no cgroup v2 mount".into()),
    }
    match (&mounts.v1_cpu, &v1_path) {
        (Some(mount), Some(path)) => Ok(Probe {
            backend: CgroupBackend::CgroupV1,
            parent: under(mount, path),
        }),
        _ => {
            why.push("no cgroup v1 hierarchy with the cpu controller".into());
            Err(CgroupError::NoController(why.join("; ")))
        }
    }
}

/// A cgroup `cleanup` removes: `qb-<8 hex>-cpu` (`--client-cpu`'s) or `qb-<8 hex>-client` (a
/// third-party client process's); its id, and whether it is a client's.
fn our_id(name: &str) -> Option<(&str, bool)> {
    let rest = name.strip_prefix("qb-")?;
    let (id, client) = match (rest.strip_suffix("-cpu"), rest.strip_suffix("-client")) {
        (Some(id), _) => (id, false),
        (_, Some(id)) => (id, true),
        _ => return None,
    };
    (id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some((id, client))
}

/// `qb-<8 hex>-cpu`: a `--client-cpu` cgroup.
pub fn is_ours(name: &str) -> bool {
    our_id(name).is_some_and(|(_, client)| !client)
}

/// Kills every process in the cgroup at `dir` and waits (up to 5 s: a loaded machine reaps
/// slowly) until it is empty.
fn kill_all(dir: &Path) {
    let _ = fs::write(dir.join("cgroup.kill"), "1");
    for _ in 0..1000 {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// One cgroup holding some of this process's threads.
#[derive(Debug)]
pub struct CpuCgroup {
    backend: CgroupBackend,
    dir: PathBuf,
    parent: PathBuf,
    /// v2: `+cpu` was written to the parent's `cgroup.subtree_control` by us.
    enabled_cpu: bool,
    /// Keeps `cleanup` off the cgroup while it is empty between runs; `None` where the owner
    /// files cannot be written (a delegated cgroup without root).
    _owner: Option<crate::owner::Owner>,
}

impl CpuCgroup {
    pub fn create(probe: &Probe) -> Result<Self, CgroupError> {
        let name = format!("qb-{:08x}-cpu", rand::random::<u32>());
        let owner = crate::owner::Owner::claim(&name).ok().flatten();
        let dir = probe.parent.join(name);
        fs::create_dir(&dir).map_err(io(&dir))?;
        let mut cg = Self {
            backend: probe.backend,
            dir,
            parent: probe.parent.clone(),
            enabled_cpu: false,
            _owner: owner,
        };
        if cg.backend == CgroupBackend::CgroupV2 {
            let _lock = ParentLock::take(&cg.parent);
            cg.write("cgroup.type", "threaded").map_err(|e| match e {
                CgroupError::Io { source, .. } if source.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    CgroupError::NoController(format!(
                        "cgroup v2 refuses a threaded child under {} (a child cgroup there holds processes); run qbench from a leaf cgroup",
                        cg.parent.display()
                    ))
                }
                other => other,
            })?;
            let control = cg.parent.join("cgroup.subtree_control");
            let on = fs::read_to_string(&control).map_err(io(&control))?;
            if !on.split_whitespace().any(|c| c == "cpu") {
                fs::write(&control, "+cpu").map_err(io(&control))?;
                cg.enabled_cpu = true;
            }
        }
        Ok(cg)
    }

    pub fn backend(&self) -> CgroupBackend {
        self.backend
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self, file: &str, value: &str) -> Result<(), CgroupError> {
        let path = self.dir.join(file);
        fs::write(&path, value).map_err(io(&path))
    }

    fn read(&self, file: &str) -> Result<String, CgroupError> {
        let path = self.dir.join(file);
        fs::read_to_string(&path).map_err(io(&path))
    }

    /// The file a thread id is written to to move that thread in.
    pub fn threads_path(&self) -> PathBuf {
        self.dir.join(self.threads_file())
    }

    fn threads_file(&self) -> &'static str {
        match self.backend {
            CgroupBackend::CgroupV2 => "cgroup.threads",
            CgroupBackend::CgroupV1 => "tasks",
        }
    }

    /// Sets the quota of a share of a core (`None`: none) and returns it as read back:
    /// (quota, period) in µs.
    pub fn set_limit(&self, fraction: Option<f64>) -> Result<(Option<u64>, u64), CgroupError> {
        self.set_quota(fraction.map(|f| (quota_us(f), period_us(f))))
    }

    /// Sets a quota of `(quota, period)` µs (`None`: none) and returns it as read back.
    pub fn set_quota(&self, q: Option<(u64, u64)>) -> Result<(Option<u64>, u64), CgroupError> {
        let period = q.map_or(PERIOD_US, |(_, p)| p);
        match self.backend {
            CgroupBackend::CgroupV2 => {
                let quota = q.map_or("max".into(), |(q, _)| q.to_string());
                self.write("cpu.max", &format!("{quota} {period}"))?;
            }
            CgroupBackend::CgroupV1 => {
                // No quota first: a new period is checked against the quota in force.
                self.write("cpu.cfs_quota_us", "-1")?;
                self.write("cpu.cfs_period_us", &period.to_string())?;
                if let Some((quota, _)) = q {
                    self.write("cpu.cfs_quota_us", &quota.to_string())?;
                }
            }
        }
        self.limit()
    }

    /// The quota and period in force, in µs (`None`: no quota).
    pub fn limit(&self) -> Result<(Option<u64>, u64), CgroupError> {
        let bad = |what: &str, text: &str| CgroupError::Io {
            path: self.dir.join(what).display().to_string(),
            source: std::io::Error::other(format!("unexpected contents `{}`", text.trim())),
        };
        let (quota, period) = match self.backend {
            CgroupBackend::CgroupV2 => {
                let text = self.read("cpu.max")?;
                let mut w = text.split_whitespace();
                let (q, p) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
                (q.to_string(), p.to_string())
            }
            CgroupBackend::CgroupV1 => (
                self.read("cpu.cfs_quota_us")?.trim().to_string(),
                self.read("cpu.cfs_period_us")?.trim().to_string(),
            ),
        };
        let period = period.parse().map_err(|_| bad("period", &period))?;
        let quota = match quota.as_str() {
            "max" | "-1" => None,
            q => Some(q.parse().map_err(|_| bad("quota", q))?),
        };
        Ok((quota, period))
    }

    /// Moves one thread of this process (its kernel thread id) into the cgroup.
    pub fn add_thread(&self, tid: i32) -> Result<(), CgroupError> {
        self.write(self.threads_file(), &tid.to_string())
    }

    /// Moves one thread back to the process's own cgroup.
    pub fn release_thread(&self, tid: i32) -> Result<(), CgroupError> {
        let path = self.parent.join(self.threads_file());
        fs::write(&path, tid.to_string()).map_err(io(&path))
    }

    /// The thread ids in the cgroup now.
    pub fn threads(&self) -> Vec<i32> {
        self.read(self.threads_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    pub fn throttling(&self) -> Throttling {
        Throttling::parse_cpu_stat(&self.read("cpu.stat").unwrap_or_default())
    }
}

/// An exclusive `flock` on the parent cgroup's directory while cpu is enabled for its
/// children or disabled again, so that two runs under one parent do not undo each other.
struct ParentLock {
    /// Held, not read: the lock lasts as long as the descriptor.
    _file: Option<fs::File>,
}

impl ParentLock {
    fn take(dir: &Path) -> Self {
        use std::os::fd::AsRawFd;
        let file = fs::File::open(dir).ok().filter(|f| {
            // SAFETY: flock on a descriptor we own; released when it closes.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) == 0 }
        });
        Self { _file: file }
    }
}

/// Whether `dir` has any child cgroup (a subdirectory).
fn has_children(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|d| d.flatten().any(|e| e.file_type().is_ok_and(|t| t.is_dir())))
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        let _lock =
            (self.backend == CgroupBackend::CgroupV2).then(|| ParentLock::take(&self.parent));
        for tid in self.threads() {
            let _ = self.release_thread(tid);
        }
        let _ = fs::remove_dir(&self.dir);
        // Another run's cgroup (or anyone's) beside ours may need cpu still: then it stays on.
        if self.enabled_cpu && !has_children(&self.parent) {
            let _ = fs::write(self.parent.join("cgroup.subtree_control"), "-cpu");
        }
    }
}

/// Removes every empty `qb-<hex>-cpu` cgroup in the cpu hierarchies (after a `kill -9`) whose
/// owner is not alive (unless forced); one that still holds threads belongs to a live run and
/// is left alone in any case (the kernel refuses). A `qb-<hex>-client` cgroup whose owner is
/// gone has its processes killed first: a client outlives a qbench killed with `kill -9`.
pub fn cleanup(scope: &Scope) -> Cleaned {
    let mounts = fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default();
    let mut out = Cleaned::default();
    for root in mounts.v2.iter().chain(&mounts.v1_cpu) {
        sweep(root, 0, scope, &mut out);
    }
    out
}

/// Depth-first, bounded: cgroup trees are shallow, and a loop must not run away.
fn sweep(dir: &Path, depth: usize, scope: &Scope, out: &mut Cleaned) {
    const MAX_DEPTH: usize = 12;
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some((id, client)) = our_id(&name) {
            if !scope.covers(id) {
                continue;
            }
            let owner = crate::owner::Owner::claim(&name);
            if !matches!(owner, Ok(Some(_))) && !scope.force {
                out.held.push(path.display().to_string());
                continue;
            }
            // A killed run's client processes (and what they started) are still in theirs.
            if client {
                kill_all(&path);
            }
            if fs::remove_dir(&path).is_ok() {
                out.removed.push(path.display().to_string());
            }
        } else if depth < MAX_DEPTH {
            sweep(&path, depth + 1, scope, out);
        }
    }
}

#[cfg(test)]
mod tests;
