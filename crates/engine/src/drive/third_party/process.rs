//! One client process: spawned in its own process group and cgroup (inside the client's
//! network namespace when there is a link), its output read as it streams, its CPU read from
//! `wait4`, and the whole group killed at the deadline or when the run is abandoned; its
//! cgroup, with whatever left the group, when it ends.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use qbench_core::report::third_party::ClientProcess;

use super::output::{self, Kept, MAX_STDOUT, STDERR_TAIL};
use crate::setup::client_cpu::ProcessJoin;
pub(super) use crate::setup::proc_group::find;
use crate::setup::proc_group::{ProcCgroup, Role};
/// Between SIGTERM and SIGKILL at the deadline: a browser's driver closes its browser.
const GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    #[error("{program}: not found; {hint}")]
    Missing { program: String, hint: String },
    #[error("{program}: refused, since others could have written it: {why}")]
    Untrusted { program: String, why: String },
    #[error("starting {program}: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
}

/// What a finished process left.
pub(super) struct Ended {
    pub record: ClientProcess,
    /// Its stdout's whole lines, up to `MAX_STDOUT` bytes.
    pub stdout: String,
    /// Lines of its stdout past `MAX_STDOUT`, not read.
    pub stdout_cut: u64,
    /// Spawned, on the monotonic clock.
    pub spawned: Instant,
    pub spawned_unix: std::time::SystemTime,
    pub ok: bool,
}

/// Ends the group when dropped before the process was reaped (a run abandoned on a signal)
/// as the deadline does: SIGTERM, up to `GRACE` for the leader to go, then SIGKILL. A
/// browser's driver needs that time: its browser is in a process group of its own, which
/// only the driver closes, and the browser writes its profile until it is closed.
struct Group {
    pgid: i32,
    reaped: bool,
    /// Killed and removed last, taking what left the group.
    cgroup: Option<ProcCgroup>,
}

impl Drop for Group {
    fn drop(&mut self) {
        let _cgroup = self.cgroup.take();
        if self.reaped {
            return;
        }
        // SAFETY: plain syscalls on a process group this run created; the leader is reaped
        // by the thread waiting on it, so `kill(pid, 0)` fails once it is gone.
        unsafe { libc::killpg(self.pgid, libc::SIGTERM) };
        let until = abandon_deadline();
        while Instant::now() < until && unsafe { libc::kill(self.pgid, 0) } == 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
    }
}

/// When the groups of abandoned runs must be gone. A run is abandoned only when qbench is
/// stopping (a signal), and the guards of its groups are dropped one after another: they
/// share one grace from the first, so a hundred processes that ignore SIGTERM hold qbench's
/// exit for `GRACE`, not a hundred times that.
fn abandon_deadline() -> Instant {
    static DEADLINE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *DEADLINE.get_or_init(|| Instant::now() + GRACE)
}

/// A reader of one of the child's pipes, on a thread of its own.
struct Reader {
    kept: Arc<Mutex<Kept>>,
    thread: std::thread::JoinHandle<()>,
}

fn reader<R: std::io::Read + Send + 'static>(
    pipe: Option<R>,
    read: fn(R, &Arc<Mutex<Kept>>, usize),
    cap: usize,
) -> Reader {
    let kept = Arc::new(Mutex::new(Kept::default()));
    let k = kept.clone();
    let thread = std::thread::spawn(move || {
        if let Some(p) = pipe {
            read(p, &k, cap);
        }
    });
    Reader { kept, thread }
}

/// What the readers kept, once they reach the end of their pipes, or after `GRACE` when a
/// process that left the group still holds a pipe open (its reader then ends with it).
async fn drain(readers: [&Reader; 2]) -> [Kept; 2] {
    let until = Instant::now() + GRACE;
    while Instant::now() < until && !readers.iter().all(|r| r.thread.is_finished()) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    readers.map(|r| output::take(&r.kept))
}

/// Runs `argv` to its end, or kills its group at `deadline` (SIGTERM, then SIGKILL).
pub(super) async fn run(
    argv: &[String],
    (netns, cpu): (Option<&str>, Option<&ProcessJoin>),
    dir: &Path,
    deadline: Duration,
    observer: &crate::observe::Observing,
) -> Result<Ended, SpawnError> {
    let mut cmd = command(argv, netns, dir);
    let cgroup = ProcCgroup::create(observer, Role::Client);
    if let Some(cg) = &cgroup {
        // SAFETY: the hook makes only async-signal-safe calls (see `joiner`).
        unsafe { cmd.pre_exec(cg.joiner()) };
    }
    if let Some(c) = cpu {
        // SAFETY: as above, the hook makes only async-signal-safe calls.
        unsafe { cmd.pre_exec(c.hook()) };
    }
    let spawned = Instant::now();
    let spawned_unix = std::time::SystemTime::now();
    let mut child = cmd.spawn().map_err(|source| SpawnError::Start {
        program: argv[0].clone(),
        source,
    })?;
    let out = reader(child.stdout.take(), output::lines, MAX_STDOUT);
    let err = reader(child.stderr.take(), output::tail, STDERR_TAIL);
    let pid = child.id() as i32;
    let group = Group {
        pgid: pid,
        reaped: false,
        cgroup,
    };
    let (waited, timed_out) = wait_until(pid, deadline).await;
    reap(group).await;
    drop(child);
    let wall = spawned.elapsed();
    let [stdout, stderr] = drain([&out, &err]).await;
    let (record, ok) = record(argv, waited, timed_out, wall, &stderr);
    Ok(Ended {
        record,
        stdout: String::from_utf8_lossy(&stdout.text).into_owned(),
        stdout_cut: stdout.cut,
        spawned,
        spawned_unix,
        ok,
    })
}

/// `argv` as a command in its own process group, inside `netns` when there is one, with
/// nothing on its stdin and both outputs piped.
fn command(argv: &[String], netns: Option<&str>, dir: &Path) -> Command {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).args(argv);
            c
        }
        None => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
    };
    // What the program leaves in its temporary directory (a browser's profile, say) goes
    // with the run's own directory, even when a kill leaves it no time to clean up.
    cmd.current_dir(dir)
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// What `wait4` returned for the group leader `pid`, once it ends or, past `deadline`, once
/// SIGTERM (then SIGKILL after `GRACE`) ended it; and whether the deadline came first.
async fn wait_until(pid: i32, deadline: Duration) -> (Waited, bool) {
    // Reaped with wait4 for its rusage: the std handle is never waited on.
    let mut waiting = tokio::task::spawn_blocking(move || wait4(pid));
    let mut timed_out = false;
    let waited = tokio::select! {
        w = &mut waiting => w,
        () = tokio::time::sleep(deadline) => {
            timed_out = true;
            // SAFETY: signals to the group this run created, not yet reaped.
            unsafe { libc::killpg(pid, libc::SIGTERM) };
            match tokio::time::timeout(GRACE, &mut waiting).await {
                Ok(w) => w,
                Err(_) => {
                    unsafe { libc::killpg(pid, libc::SIGKILL) };
                    waiting.await
                }
            }
        }
    };
    (waited.unwrap_or((0, None)), timed_out)
}

/// Ends what the reaped leader left: the rest of its group, then its cgroup.
async fn reap(mut group: Group) {
    group.reaped = true;
    // Whatever the leader left behind in its group goes with it.
    // SAFETY: as above; ESRCH (nothing left) is the usual answer.
    unsafe { libc::killpg(group.pgid, libc::SIGKILL) };
    // And whatever left the group (setsid) is in the cgroup: its end closes the pipes too.
    if let Some(cg) = group.cgroup.take() {
        let _ = tokio::task::spawn_blocking(move || drop(cg)).await;
    }
}

/// The process's record from its wait status and usage, and whether it succeeded: exited 0
/// before its deadline. Only a failed process keeps its stderr's tail.
fn record(
    argv: &[String],
    (status, usage): Waited,
    timed_out: bool,
    wall: Duration,
    stderr: &Kept,
) -> (ClientProcess, bool) {
    let exit = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let signal = libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status));
    let ok = exit == Some(0) && !timed_out;
    let tail = &stderr.text[stderr.text.len().saturating_sub(STDERR_TAIL)..];
    let stderr_tail = match ok {
        true => None,
        false => Some(String::from_utf8_lossy(tail).trim().to_string()).filter(|t| !t.is_empty()),
    };
    let (user_s, sys_s, max_rss_kib) = usage.unwrap_or((0.0, 0.0, 0));
    let record = ClientProcess {
        argv: argv.to_vec(),
        exit,
        signal,
        timed_out,
        wall_us: u64::try_from(wall.as_micros()).unwrap_or(u64::MAX),
        user_s,
        sys_s,
        max_rss_kib,
        stderr_tail,
        anchor: None,
    };
    (record, ok)
}

/// A raw wait status and (user s, sys s, max RSS KiB), when `wait4` gave them.
type Waited = (i32, Option<(f64, f64, u64)>);

/// Waits for `pid`; its raw status and (user s, sys s, max RSS KiB).
fn wait4(pid: i32) -> Waited {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child, with valid pointers.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            return (
                status,
                Some((
                    secs(ru.ru_utime),
                    secs(ru.ru_stime),
                    ru.ru_maxrss.max(0) as u64,
                )),
            );
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return (status, None);
        }
    }
}
