//! One run's server: its directory (certificate, key, configuration, document root), its
//! process group and cgroup, its readiness (listening on the run's sockets, by the kernel's
//! own tables), and its stop: SIGTERM to the whole group, SIGKILL after a grace, the cgroup
//! emptied and removed, the directory removed.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use qbench_core::server_program::ServerRun;
use qbench_core::wire::PAYLOAD_PATTERN;
use qbench_core::Protocol;

use super::configs::{self, Setting, CERT, KEY, ROOT};
use super::{ProgramServer, READY_WITHIN, STOP_GRACE};
use crate::observe::Observing;
use crate::setup::proc_group::{ProcCgroup, Role};

/// The tail of its stderr kept, for a failure's reason.
const STDERR_TAIL: usize = 4096;

/// A started server, stopped by `stop` after its run, or on drop when the run is abandoned.
pub(crate) struct Running {
    pid: i32,
    /// Exit status once reaped.
    status: Option<i32>,
    cgroup: Option<ProcCgroup>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The thread reading its stderr, which ends when the last process holding it does.
    reader: std::thread::JoinHandle<()>,
    record: ServerRun,
    /// The CPU of its cgroup when it was ready: its start is not the run's.
    cpu0: Option<(f64, f64)>,
    /// Declared last: removed after the processes are gone.
    _dir: tempfile::TempDir,
}

/// `size` bytes of the payload pattern qbench-server sends, so `--verify` checks them alike.
fn write_object(path: &Path, size: u64) -> std::io::Result<()> {
    let chunk: Vec<u8> = PAYLOAD_PATTERN
        .iter()
        .copied()
        .cycle()
        .take(1 << 16)
        .collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create_new(path)?);
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    f.flush()
}

/// The run's directory: certificate, key, document root and configuration.
fn prepare(p: &ProgramServer, dir: &Path) -> std::io::Result<configs::Launch> {
    std::fs::write(dir.join(CERT), &p.cert_pem)?;
    std::fs::write(dir.join(KEY), &p.key_pem)?;
    let bytes = dir.join(ROOT).join("bytes");
    std::fs::create_dir_all(&bytes)?;
    std::fs::create_dir_all(dir.join("tmp"))?;
    let mut sizes = p.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    for n in sizes {
        write_object(&bytes.join(n.to_string()), n)?;
    }
    let dir_text = dir.to_string_lossy();
    let launch = configs::launch(
        &p.kind,
        &Setting {
            program: &p.program.to_string_lossy(),
            addr: &p.addr,
            port: p.port,
            threads: p.threads,
            proto: p.proto,
            dir: &dir_text,
            app: p.app.as_deref().and_then(Path::to_str),
            cc: p.cc.as_deref(),
        },
    );
    if let Some((name, text)) = &launch.config {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(launch)
}

fn command(argv: &[String], netns: Option<&str>, dir: &Path, env: &[(&str, String)]) -> Command {
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
    // Whatever it keeps (caches, temporary files, a Go build cache) goes with the directory.
    for var in [
        "TMPDIR",
        "HOME",
        "XDG_DATA_HOME",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
    ] {
        cmd.env(var, dir);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// Keeps the last `STDERR_TAIL` bytes of `pipe`, on a thread of its own.
fn keep_tail(
    mut pipe: impl Read + Send + 'static,
) -> (Arc<Mutex<Vec<u8>>>, std::thread::JoinHandle<()>) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let k = kept.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut t = k.lock().unwrap_or_else(|e| e.into_inner());
            t.extend_from_slice(&buf[..n]);
            let cut = t.len().saturating_sub(STDERR_TAIL);
            t.drain(..cut);
        }
    });
    (kept, reader)
}

/// Whether a socket of the kernel's table `text` (`/proc/net/tcp` and the like) is bound
/// to `port`, listening when `listen`.
fn bound(text: &str, port: u16, listen: bool) -> bool {
    let want = format!(":{port:04X}");
    text.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1).is_some_and(|a| a.ends_with(&want)) && (!listen || f.get(3) == Some(&"0A"))
    })
}

/// Whether the server listens on every socket `proto` needs, in its namespace.
fn listening(netns: Option<&str>, port: u16, proto: Protocol) -> bool {
    let read = |file: &str| match netns {
        Some(ns) => qbench_shaper::netns::read_net_file(ns, file).unwrap_or_default(),
        None => std::fs::read_to_string(format!("/proc/net/{file}")).unwrap_or_default(),
    };
    let (files, listen): (&[&str], bool) = match proto {
        Protocol::H3 => (&["udp", "udp6"], false),
        _ => (&["tcp", "tcp6"], true),
    };
    files.iter().any(|f| bound(&read(f), port, listen))
}

/// `pid`'s exit status if it has ended (and is reaped now).
fn reaped(pid: i32) -> Option<i32> {
    let mut status = 0;
    // SAFETY: a non-blocking wait for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (r == pid).then_some(status)
}

fn ended(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("signal {}", libc::WTERMSIG(status))
    } else {
        format!("status {status}")
    }
}

fn tail(kept: &Mutex<Vec<u8>>) -> Option<String> {
    let t = kept.lock().unwrap_or_else(|e| e.into_inner());
    Some(String::from_utf8_lossy(&t).trim().to_string()).filter(|t| !t.is_empty())
}

/// The largest peak resident set (KiB) among `pids`.
fn max_rss(pids: &[i32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:")?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
        })
        .max()
        .unwrap_or(0)
}

pub(super) async fn start(p: &ProgramServer, observer: &Observing) -> Result<Running, String> {
    let name = p.kind.name();
    let dir = tempfile::Builder::new()
        .prefix("qbench-server-")
        .tempdir()
        .map_err(|e| format!("--server {name}: its directory: {e}"))?;
    let launch = prepare(p, dir.path()).map_err(|e| format!("--server {name}: its files: {e}"))?;
    let mut cmd = command(&launch.argv, p.netns.as_deref(), dir.path(), &launch.env);
    let cgroup = ProcCgroup::create(observer, Role::Server);
    if let Some(cg) = &cgroup {
        // SAFETY: the hook makes only async-signal-safe calls (see `joiner`).
        unsafe { cmd.pre_exec(cg.joiner()) };
    }
    let spawned = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("--server {name}: starting {}: {e}", launch.argv[0]))?;
    let (stderr, reader) = keep_tail(child.stderr.take().expect("piped"));
    let pid = child.id() as i32;
    // Reaped with waitpid: the std handle is never waited on.
    drop(child);
    let mut running = Running {
        pid,
        status: None,
        cgroup,
        stderr,
        reader,
        record: ServerRun {
            name: name.to_string(),
            version: p.version.clone(),
            argv: launch.argv,
            config: launch.config.map(|(_, text)| text),
            unmatched: p.unmatched.clone(),
            ready_us: 0,
            user_s: 0.0,
            sys_s: 0.0,
            max_rss_kib: 0,
            processes: 0,
            ended: String::new(),
            stderr_tail: None,
        },
        cpu0: None,
        _dir: dir,
    };
    let sockets = match p.proto {
        Protocol::H3 => "UDP",
        _ => "TCP",
    };
    loop {
        if let Some(s) = reaped(pid) {
            running.status = Some(s);
            running.drained().await;
            let why = tail(&running.stderr)
                .map(|t| format!(": {}", last_line(&t)))
                .unwrap_or_default();
            return Err(format!(
                "--server {name} ended ({}) before it listened{why}",
                ended(s)
            ));
        }
        if listening(p.netns.as_deref(), p.port, p.proto) {
            break;
        }
        if spawned.elapsed() >= READY_WITHIN {
            return Err(format!(
                "--server {name} did not listen on {sockets} port {} within {}s",
                p.port,
                READY_WITHIN.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running.record.ready_us = u64::try_from(spawned.elapsed().as_micros()).unwrap_or(u64::MAX);
    running.cpu0 = running.cgroup.as_ref().and_then(ProcCgroup::cpu);
    Ok(running)
}

/// The last line of a tail, for a one-line reason.
fn last_line(t: &str) -> &str {
    t.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(t)
        .trim()
}

impl Running {
    /// Once its stderr is read to the end (an ended process's last words are still in the
    /// pipe when it is reaped), or after a grace when a process that left the group holds it.
    async fn drained(&self) {
        let until = Instant::now() + Duration::from_millis(500);
        while !self.reader.is_finished() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Whether it is still running (not reaped).
    pub(crate) fn alive(&mut self) -> bool {
        if self.status.is_none() {
            self.status = reaped(self.pid);
        }
        self.status.is_none()
    }

    /// Stops it, and what it did during the run; `Err` with the record when it had ended
    /// before it was stopped (crashed or exited mid-run).
    #[expect(
        clippy::result_large_err,
        reason = "once per run, and both outcomes carry the same record"
    )]
    pub(crate) async fn stop(mut self) -> Result<ServerRun, ServerRun> {
        let early = !self.alive();
        let pids = match &self.cgroup {
            Some(cg) => cg.procs(),
            None => vec![self.pid],
        };
        self.record.processes = pids.len() as u32;
        self.record.max_rss_kib = max_rss(&pids);
        let cpu1 = self.cgroup.as_ref().and_then(ProcCgroup::cpu);
        if let Some(((u0, s0), (u1, s1))) = self.cpu0.zip(cpu1) {
            self.record.user_s = u1 - u0;
            self.record.sys_s = s1 - s0;
        }
        // SAFETY: signals to the process group this run created.
        unsafe { libc::killpg(self.pid, libc::SIGTERM) };
        let until = Instant::now() + STOP_GRACE;
        while self.alive() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let killed = self.alive();
        // What is left of the group, and then of the cgroup, goes now.
        unsafe { libc::killpg(self.pid, libc::SIGKILL) };
        while self.alive() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if let Some(cg) = self.cgroup.take() {
            let _ = tokio::task::spawn_blocking(move || drop(cg)).await;
        }
        let status = self.status.unwrap_or_default();
        self.record.ended = match killed {
            true => "killed".into(),
            false => ended(status),
        };
        let expected = !early
            && !killed
            && (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
                || libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGTERM);
        let mut record = std::mem::replace(&mut self.record, empty_record());
        if !expected {
            self.drained().await;
            record.stderr_tail = tail(&self.stderr);
        }
        match early {
            true => Err(record),
            false => Ok(record),
        }
    }
}

fn empty_record() -> ServerRun {
    ServerRun {
        name: String::new(),
        version: None,
        argv: Vec::new(),
        config: None,
        unmatched: Vec::new(),
        ready_us: 0,
        user_s: 0.0,
        sys_s: 0.0,
        max_rss_kib: 0,
        processes: 0,
        ended: String::new(),
        stderr_tail: None,
    }
}

impl Drop for Running {
    /// A run abandoned (a signal) or a server that never listened: SIGTERM to the group, up
    /// to the grace for its leader to go, then SIGKILL; the cgroup takes what left the group.
    fn drop(&mut self) {
        if self.alive() {
            // SAFETY: signals to the process group this run created, not yet reaped.
            unsafe { libc::killpg(self.pid, libc::SIGTERM) };
            let until = Instant::now() + STOP_GRACE;
            while self.alive() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            unsafe { libc::killpg(self.pid, libc::SIGKILL) };
            let until = Instant::now() + STOP_GRACE;
            while self.alive() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        drop(self.cgroup.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_found_by_its_port_and_state() {
        let tcp = "  sl  local_address rem_address   st\n\
                   0: 0202A8C6:115C 00000000:0000 0A 00000000:00000000\n\
                   1: 0202A8C6:1F90 0102A8C6:D431 01 00000000:00000000\n";
        assert!(bound(tcp, 0x115C, true));
        assert!(!bound(tcp, 0x1F90, true));
        assert!(bound(tcp, 0x1F90, false));
        assert!(!bound(tcp, 80, false));
        assert!(!bound("", 0x115C, false));
    }

    #[test]
    fn objects_are_the_payload_pattern_to_the_byte() {
        let dir = tempfile::tempdir().unwrap();
        for n in [0u64, 1, 63, 64, 65, 70_000] {
            let p = dir.path().join(n.to_string());
            write_object(&p, n).unwrap();
            let got = std::fs::read(&p).unwrap();
            assert_eq!(got.len() as u64, n);
            assert_eq!(qbench_core::wire::check_payload(0, &got), Ok(()));
        }
        // Never over a file that is there.
        assert!(write_object(&dir.path().join("1"), 5).is_err());
    }
}
