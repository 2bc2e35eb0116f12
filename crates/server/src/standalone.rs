//! `qbench-server` / `qbench serve`: serve until SIGINT, SIGTERM or SIGHUP.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::access::{exposure_warning, TOKEN_ENV};
use crate::{identity_for, Protocol, Server, ServerError, ServerOptions, Stats};
use qbench_stack::fdlimit::raise_fd_limit;

/// Where the server writes the certificate a client pins with `--ca`.
pub const DEFAULT_CERT_OUT: &str = "qbench-cert.pem";

/// Where the generated certificate goes (`--cert-out`), and whether an existing file there
/// is replaced (`--force`).
#[derive(Debug, Clone)]
pub struct CertOutput {
    pub path: PathBuf,
    pub force: bool,
}

/// More workers than this is a typo, not a machine.
pub const MAX_THREADS: i64 = 1024;

/// The name of the runtime's threads (tokio gives its blocking pool the same one).
pub const WORKER_NAME: &str = "qbench-worker";

/// The variable tokio reads for its worker count when none is given.
pub const THREADS_ENV: &str = "TOKIO_WORKER_THREADS";

#[derive(Debug, thiserror::Error)]
pub enum ThreadsError {
    #[error("{THREADS_ENV}: `{0}` is not a number of threads from 1 to {MAX_THREADS}")]
    BadEnv(String),
    #[error("starting the runtime: {0}")]
    Runtime(#[from] io::Error),
}

/// Variables read as flags' values that, set but empty, mean unset (as curl and browsers take
/// an empty SSLKEYLOGFILE): otherwise an empty one is a `--keylog` without a file, or a token
/// that is no token. Called first thing in `main`, while the process has one thread.
pub fn unset_empty_env() {
    for name in ["SSLKEYLOGFILE", TOKEN_ENV] {
        if std::env::var_os(name).is_some_and(|v| v.is_empty()) {
            std::env::remove_var(name);
        }
    }
}

/// Whether `e` comes of what the user gave (a bad `TOKIO_WORKER_THREADS`), which exits 2.
pub fn is_bad_input(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<ThreadsError>(),
            Some(ThreadsError::BadEnv(_))
        )
    })
}

/// The worker count `TOKIO_WORKER_THREADS` gives, read here because tokio panics on a bad one.
pub fn threads_from_env(value: Option<&std::ffi::OsStr>) -> Result<Option<u16>, ThreadsError> {
    let Some(v) = value else { return Ok(None) };
    let text = v.to_string_lossy();
    match text.trim().parse::<u16>() {
        Ok(n) if n >= 1 && i64::from(n) <= MAX_THREADS => Ok(Some(n)),
        _ => Err(ThreadsError::BadEnv(text.chars().take(40).collect())),
    }
}

/// The multi-threaded runtime the server runs on: `threads` workers (`--threads`), else
/// `TOKIO_WORKER_THREADS`'s count, else one per CPU.
pub fn runtime(threads: Option<u16>) -> Result<tokio::runtime::Runtime, ThreadsError> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    let n = match threads {
        Some(n) => Some(n),
        None => threads_from_env(std::env::var_os(THREADS_ENV).as_deref())?,
    };
    if let Some(n) = n {
        b.worker_threads(usize::from(n));
    }
    Ok(b.thread_name(WORKER_NAME).enable_all().build()?)
}

/// The certificate file this server wrote. It is removed when the server stops (a generated
/// certificate is worthless once its key is gone), but only if it is still the very file this
/// server wrote: another server, or the user, may have replaced it since.
struct CertFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Drop for CertFile {
    fn drop(&mut self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if m.dev() == self.dev && m.ino() == self.ino {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

fn create_new(path: &Path, pem: &str) -> io::Result<std::fs::File> {
    let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
    f.write_all(pem.as_bytes())?;
    f.sync_all()?;
    Ok(f)
}

fn write_cert(out: &CertOutput, pem: &str) -> Result<CertFile, ServerError> {
    let path = &out.path;
    let err = |source| ServerError::WriteCert {
        path: path.clone(),
        source,
    };
    let file = if out.force {
        // A new file renamed over the old one: readers see the old or the new, never half.
        let name = path
            .file_name()
            .ok_or_else(|| err(io::ErrorKind::InvalidInput.into()))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let f = create_new(&tmp, pem).map_err(err)?;
        if let Err(e) = std::fs::rename(&tmp, path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        f
    } else {
        match create_new(path, pem) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(ServerError::CertExists { path: path.clone() })
            }
            Err(e) => return Err(err(e)),
        }
    };
    let m = file.metadata().map_err(err)?;
    Ok(CertFile {
        path: path.clone(),
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// Serves until SIGINT, SIGTERM or SIGHUP; with `relay`, as `qbench proxy` (the upstream, and how to
/// say where it relays). Takes the options and certificate output as the command line gives
/// them (`cli::ServerArgs`, `&cli::CertOut`) or as a library builds them.
pub async fn serve_until_signal(
    opts: impl Into<ServerOptions>,
    cert_out: impl Into<CertOutput>,
    relay: Option<(crate::relay::Upstream, String)>,
) -> Result<(), ServerError> {
    let (opts, cert_out) = (opts.into(), cert_out.into());
    if let Err(e) = raise_fd_limit() {
        crate::note!("warning: could not raise the open-file limit ({e}); ulimit -n bounds how many connections the server holds");
    }
    let generated = opts.cert.is_none();
    let identity = identity_for(&opts)?;
    let protocols: Vec<&str> = opts
        .protocols
        .iter()
        .map(|p| Protocol::as_str(*p))
        .collect();
    let warning = exposure_warning(opts.listen, opts.max_object, opts.telemetry);
    let from_env = std::env::var_os(TOKEN_ENV).is_some();
    // One UDP socket per worker thread of the runtime this runs on.
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let mut server = Server::bind(
        opts,
        identity,
        qbench_stack::reuseport::sockets_for(workers),
    )?;
    let (name, relaying) = match relay {
        Some((up, what)) => {
            server.relay_to(up);
            ("qbench proxy", format!(" {what}"))
        }
        None => ("qbench-server", String::new()),
    };
    let mut signals = StopSignals::listen()?;
    let _cert = if generated {
        Some(write_cert(&cert_out, server.cert_pem())?)
    } else {
        None
    };
    crate::note!(
        "{name} listening on {} ({}){relaying}{}",
        server.local_addr(),
        protocols.join(","),
        if generated {
            format!("; certificate for --ca: {}", cert_out.path.display())
        } else {
            String::new()
        }
    );
    if let Some(w) = warning {
        crate::note!("{w}");
    }
    note_token(&server, from_env);
    let stats = server.stats();
    let quic = server.quic_endpoints();
    tokio::select! {
        _ = server.run() => {}
        () = signals.any() => {}
    }
    close_quic(&quic).await;
    qbench_stack::qlog::flush_all();
    note_stopped(name, &stats);
    Ok(())
}

/// The signals that stop the server, listened for before its first line: whoever waits for
/// that line may signal at once, and the certificate must still be cleaned up then.
struct StopSignals {
    term: Signal,
    int: Signal,
    /// A closed terminal or a supervisor's reload must not end it without its last line and
    /// without removing the certificate it wrote.
    hup: Signal,
}

impl StopSignals {
    fn listen() -> Result<Self, ServerError> {
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(ServerError::Signal)?,
            int: signal(SignalKind::interrupt()).map_err(ServerError::Signal)?,
            hup: signal(SignalKind::hangup()).map_err(ServerError::Signal)?,
        })
    }

    /// Until one of them comes.
    async fn any(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
            _ = self.hup.recv() => {}
        }
    }
}

/// Which telemetry token clients must give: the one in the environment, or the one printed.
fn note_token(server: &Server, from_env: bool) {
    match server.telemetry_token() {
        Some(_) if from_env => crate::note!("telemetry token: the one in {TOKEN_ENV}"),
        Some(t) => crate::note!("telemetry token (qbench --telemetry-token): {t}"),
        None => {}
    }
}

/// Peers learn that the server stopped (CONNECTION_CLOSE) instead of finding out at their
/// idle timeout: a proxy in front of it opens a new connection at its next request.
async fn close_quic(quic: &[quinn::Endpoint]) {
    for ep in quic {
        ep.close(0u32.into(), b"server stopping");
    }
    let idle = futures_util::future::join_all(quic.iter().map(|ep| ep.wait_idle()));
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), idle).await;
}

/// The server's last line: what it served and refused.
fn note_stopped(name: &str, stats: &Stats) {
    crate::note!(
        "{name}: stopped after {} connections ({} refused at --max-connections, {} \
         handshake timeouts, {} idle closes, {} telemetry requests refused as busy)",
        Stats::get(&stats.accepted),
        Stats::get(&stats.refused),
        Stats::get(&stats.handshake_timeouts),
        Stats::get(&stats.idle_closes),
        Stats::get(&stats.telemetry_busy),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_environment_gives_a_count_or_a_one_line_error() {
        use std::ffi::OsStr;
        assert_eq!(threads_from_env(None).unwrap(), None);
        assert_eq!(threads_from_env(Some(OsStr::new("3"))).unwrap(), Some(3));
        for bad in ["0", "1025", "abc", "", "-2", "100000"] {
            let e = threads_from_env(Some(OsStr::new(bad)))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("TOKIO_WORKER_THREADS: `"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    proptest! {
        #[test]
        fn the_environment_is_a_count_or_an_error(s in "\\PC{0,12}") {
            match threads_from_env(Some(std::ffi::OsStr::new(&s))) {
                Ok(Some(n)) => prop_assert!((1..=MAX_THREADS).contains(&i64::from(n))),
                Ok(None) => prop_assert!(false, "a value gives a count or an error"),
                Err(e) => prop_assert!(e.to_string().starts_with(THREADS_ENV)),
            }
        }
    }
}
