//! `qbench-server` / `qbench serve`: serve until SIGINT, SIGTERM or SIGHUP.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use clap::{Args, Parser};
use tokio::signal::unix::{signal, SignalKind};

use crate::access::{exposure_warning, TOKEN_ENV};
use crate::{identity_for, Protocol, Server, ServerError, ServerOptions, Stats};
use qbench_stack::fdlimit::raise_fd_limit;

/// Where the server writes the certificate a client pins with `--ca`.
pub const DEFAULT_CERT_OUT: &str = "qbench-cert.pem";

/// Where the generated certificate goes.
#[derive(Debug, Clone, Args)]
pub struct CertOut {
    /// Where to write the generated certificate (PEM) for clients' --ca; an existing file is
    /// left alone (the server refuses to start) unless --force
    #[arg(long, default_value = DEFAULT_CERT_OUT)]
    pub cert_out: PathBuf,

    /// Replace an existing --cert-out file
    #[arg(long)]
    pub force: bool,
}

/// How many threads serve. One per side is what a single-connection benchmark on a small
/// machine wants: a second worker of a server that can only keep one busy shares a core
/// with the client instead (measured in the book, "Userspace packet cost").
#[derive(Debug, Clone, Args)]
pub struct Threads {
    /// Worker threads of the server's runtime; connections spread over them [default: one
    /// per CPU, or TOKIO_WORKER_THREADS]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_THREADS))]
    pub threads: Option<u16>,
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

impl Threads {
    /// The multi-threaded runtime `--threads` (or `TOKIO_WORKER_THREADS`) asks for.
    pub fn runtime(&self) -> Result<tokio::runtime::Runtime, ThreadsError> {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        let n = match self.threads {
            Some(n) => Some(n),
            None => threads_from_env(std::env::var_os(THREADS_ENV).as_deref())?,
        };
        if let Some(n) = n {
            b.worker_threads(usize::from(n));
        }
        Ok(b.thread_name(WORKER_NAME).enable_all().build()?)
    }
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

fn write_cert(out: &CertOut, pem: &str) -> Result<CertFile, ServerError> {
    let path = &out.cert_out;
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
/// say where it relays).
pub async fn serve_until_signal(
    opts: ServerOptions,
    cert_out: &CertOut,
    relay: Option<(crate::relay::Upstream, String)>,
) -> Result<(), ServerError> {
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
    // Before the first line: whoever waits for it may signal at once, and the certificate
    // must still be cleaned up then.
    let mut term = signal(SignalKind::terminate()).map_err(ServerError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(ServerError::Signal)?;
    // A closed terminal or a supervisor's reload must not end it without its last line and
    // without removing the certificate it wrote.
    let mut hup = signal(SignalKind::hangup()).map_err(ServerError::Signal)?;
    let _cert = if generated {
        Some(write_cert(cert_out, server.cert_pem())?)
    } else {
        None
    };
    crate::note!(
        "{name} listening on {} ({}){relaying}{}",
        server.local_addr(),
        protocols.join(","),
        if generated {
            format!("; certificate for --ca: {}", cert_out.cert_out.display())
        } else {
            String::new()
        }
    );
    if let Some(w) = warning {
        crate::note!("{w}");
    }
    match server.telemetry_token() {
        Some(_) if from_env => crate::note!("telemetry token: the one in {TOKEN_ENV}"),
        Some(t) => crate::note!("telemetry token (qbench --telemetry-token): {t}"),
        None => {}
    }
    let stats = server.stats();
    let quic = server.quic_endpoints();
    tokio::select! {
        _ = server.run() => {}
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = hup.recv() => {}
    }
    // Peers learn that the server stopped (CONNECTION_CLOSE) instead of finding out at their
    // idle timeout: a proxy in front of it opens a new connection at its next request.
    for ep in &quic {
        ep.close(0u32.into(), b"server stopping");
    }
    let idle = futures_util::future::join_all(quic.iter().map(|ep| ep.wait_idle()));
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), idle).await;
    qbench_stack::qlog::flush_all();
    crate::note!(
        "{name}: stopped after {} connections ({} refused at --max-connections, {} \
         handshake timeouts, {} idle closes, {} telemetry requests refused as busy)",
        Stats::get(&stats.accepted),
        Stats::get(&stats.refused),
        Stats::get(&stats.handshake_timeouts),
        Stats::get(&stats.idle_closes),
        Stats::get(&stats.telemetry_busy),
    );
    Ok(())
}

/// The matched qbench server: HTTP/3 on UDP and HTTP/2 + HTTP/1.1 on TCP, same port,
/// serving GET /bytes/N.
#[derive(Debug, Parser)]
#[command(name = "qbench-server", version = env!("QBENCH_VERSION"))]
pub struct Cli {
    #[command(flatten)]
    pub serve: Serve,
}

// The server's flags, the same for `qbench-server` and `qbench serve`. (A doc comment here
// would become the `about` of every command that flattens it.)
#[derive(Debug, clap::Args)]
pub struct Serve {
    #[command(flatten)]
    pub server: ServerOptions,

    #[command(flatten)]
    pub cert_out: CertOut,

    #[command(flatten)]
    pub threads: Threads,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(threads: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["qbench-server".to_string(), format!("--threads={threads}")])
    }

    #[test]
    fn threads_set_the_runtime_workers() {
        for n in [1, 3] {
            let cli = parse(&n.to_string()).unwrap();
            let rt = cli.serve.threads.runtime().unwrap();
            assert_eq!(rt.metrics().num_workers(), n);
        }
        let none = Cli::try_parse_from(["qbench-server"]).unwrap();
        assert_eq!(none.serve.threads.threads, None);
    }

    #[test]
    fn bad_thread_counts_are_refused_naming_the_flag() {
        for bad in ["0", "1025", "-1", "two", ""] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(e.to_string().contains("--threads"), "{bad}: {e}");
        }
    }

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

        #[test]
        fn threads_parse_to_a_count_or_an_error(s in "\\PC{0,8}") {
            if let Ok(cli) = parse(&s) {
                let n = i64::from(cli.serve.threads.threads.unwrap());
                prop_assert!((1..=MAX_THREADS).contains(&n));
            }
        }
    }
}
