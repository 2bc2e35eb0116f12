//! `--server`: a third-party server in qbench-server's place, inside the server's namespace
//! behind the link, on a certificate made for the command, serving generated files of exactly
//! the workload's sizes at the paths qbench-server serves them (`/bytes/N`). It is started
//! before each run, in a directory of its own, and stopped after it.

mod configs;
mod running;

use std::path::PathBuf;

use anyhow::Context;
use qbench_core::server_program::{ServerProgram, Unmatched};
use qbench_core::Protocol;

use crate::observe::Observing;
use crate::plan::config::Config;

pub(crate) use running::Running;

/// How long a server is given to listen on its sockets after it is spawned, and to end after
/// SIGTERM before it is killed.
pub(crate) const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);
pub(crate) const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// One configuration's server program, ready to be started for each run.
pub(crate) struct ProgramServer {
    pub kind: ServerProgram,
    program: PathBuf,
    /// The hypercorn application, found and checked before the first run.
    app: Option<PathBuf>,
    /// The server's namespace (`None`: loopback, this one).
    netns: Option<String>,
    pub addr: String,
    pub port: u16,
    proto: Protocol,
    threads: u32,
    cc: Option<String>,
    /// TCP servers' congestion control (h1, h2): set in the namespace, or the host's.
    tcp_cc: Option<configs::TcpCc>,
    /// The object sizes of the workload: a file of each at `bytes/N`.
    sizes: Vec<u64>,
    pub cert_pem: String,
    key_pem: String,
    pub version: Option<String>,
    pub unmatched: Vec<Unmatched>,
}

/// `program` as an executable file, from the variable that names it or `PATH`.
fn locate(kind: &ServerProgram) -> anyhow::Result<PathBuf> {
    let named = kind
        .program_env()
        .and_then(std::env::var_os)
        .map(|v| v.to_string_lossy().into_owned());
    let program = named.unwrap_or_else(|| kind.program());
    crate::setup::proc_group::find(&program).ok_or_else(|| {
        anyhow::Error::new(crate::error::ConfigError {
            flag: "--server",
            message: format!("{program}: not found; {}", kind.install_hint()),
        })
    })
}

/// hypercorn's application file, where qbench installs it, trusted.
fn hypercorn_app() -> anyhow::Result<PathBuf> {
    use crate::setup::installed::{candidates, trusted, HYPERCORN_APP, HYPERCORN_ENV};
    let looked = candidates(HYPERCORN_APP, HYPERCORN_ENV);
    let found = looked.iter().find(|p| p.exists()).ok_or_else(|| {
        anyhow::Error::new(crate::error::ConfigError {
            flag: "--server",
            message: format!(
                "hypercorn: {HYPERCORN_APP} is not installed beside qbench; set {HYPERCORN_ENV}"
            ),
        })
    })?;
    trusted(found).map_err(|why| {
        anyhow::Error::new(crate::error::ConfigError {
            flag: "--server",
            message: format!("hypercorn: refused, since others could have written it: {why}"),
        })
    })?;
    Ok(std::path::absolute(found)?)
}

/// What the server says of its own version, first line; asked once.
fn version(kind: &ServerProgram, program: &std::path::Path) -> Option<String> {
    let path = program.to_str()?;
    let (cmd, args): (&str, &[&str]) = match kind {
        ServerProgram::Caddy => (path, &["version"]),
        // nginx says it on stderr.
        ServerProgram::Nginx => (path, &["-v"]),
        ServerProgram::QuicGo => (path, &["-version"]),
        // The example server has no --version: its package says which ngtcp2 it is.
        ServerProgram::Ngtcp2 => ("dpkg-query", &["-W", "-f=ngtcp2-server ${Version}", "ngtcp2-server"]),
        ServerProgram::Hypercorn => (
            "python3",
            &["-c", "import importlib.metadata as m; print('hypercorn', m.version('hypercorn'), 'aioquic', m.version('aioquic'))"],
        ),
        ServerProgram::Exec(_) => return None,
    };
    let out = std::process::Command::new(cmd)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = [out.stdout, out.stderr].concat();
    let text = String::from_utf8_lossy(&text);
    let first = text.lines().next()?.trim();
    let first = first.strip_prefix("nginx version: ").unwrap_or(first);
    (out.status.success() && !first.is_empty()).then(|| first.chars().take(200).collect())
}

/// A port free on TCP and UDP alike at `addr`, in the namespace `netns`.
fn free_port(netns: Option<&str>, addr: &str) -> anyhow::Result<u16> {
    let ip: std::net::IpAddr = addr.parse().context("the server's address")?;
    let ns = netns.map(str::to_string);
    // A thread of its own enters the namespace, which the calling thread must not.
    std::thread::spawn(move || -> anyhow::Result<u16> {
        if let Some(ns) = &ns {
            qbench_shaper::netns::enter(ns).context("entering the server's namespace")?;
        }
        for _ in 0..64 {
            let tcp = std::net::TcpListener::bind((ip, 0))?;
            let port = tcp.local_addr()?.port();
            if std::net::UdpSocket::bind((ip, port)).is_ok() {
                return Ok(port);
            }
        }
        anyhow::bail!("no port free on both TCP and UDP at {ip}")
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the port finder panicked"))?
}

impl ProgramServer {
    /// `cfg`'s server program, checked and found, at `addr` in `netns`.
    pub(crate) fn new(
        cfg: &Config,
        kind: &ServerProgram,
        netns: Option<String>,
        addr: String,
    ) -> anyhow::Result<Self> {
        let spec = cfg.spec();
        let program = locate(kind)?;
        let app = match kind {
            ServerProgram::Hypercorn => Some(hypercorn_app()?),
            _ => None,
        };
        let port = free_port(netns.as_deref(), &addr)?;
        let mut names = vec![addr.clone()];
        names.push(qbench_shaper::plan::SERVER_ADDR.to_string());
        names.push("localhost".into());
        let ck = rcgen::generate_simple_self_signed(names).context("the server's certificate")?;
        let sizes = (spec.objects.iter())
            .flat_map(|w| w.groups().iter().map(|g| g.size.0))
            .collect();
        // A TCP server's congestion control is its namespace's default: set to the run's (as
        // qbench-server sets its sockets') in the server's namespace, which is qbench's; on
        // loopback it is the host's, recorded where it differs.
        let tcp_cc = match spec.proto.is_quic() {
            true => None,
            false => Some(tcp_cc(spec.cc, netns.is_some())?),
        };
        Ok(Self {
            version: version(kind, &program),
            unmatched: configs::unmatched(kind, spec.proto, spec.server_threads, tcp_cc.as_ref()),
            tcp_cc,
            kind: kind.clone(),
            program,
            app,
            netns,
            addr,
            port,
            proto: spec.proto,
            threads: spec.server_threads,
            cc: spec.cc.map(|c| c.to_string()),
            sizes,
            cert_pem: ck.cert.pem(),
            key_pem: ck.signing_key.serialize_pem(),
        })
    }

    /// Its description in the console and the report.
    pub(crate) fn describe(&self) -> String {
        match &self.version {
            Some(v) => format!("{} ({v})", self.kind.name()),
            None => self.kind.name().to_string(),
        }
    }

    /// Starts it for one run: its namespace's TCP congestion control set, its directory made,
    /// its files written, spawned, and listening.
    pub(crate) async fn start(&self, observer: &Observing) -> Result<Running, String> {
        if let (Some(ns), Some(configs::TcpCc::Set(cc))) = (&self.netns, &self.tcp_cc) {
            set_tcp_cc(ns, cc)?;
        }
        running::start(self, observer).await
    }
}

/// A sysctl of this host (a namespace's start from the host's), trimmed.
fn host_sysctl(key: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{key}"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// What a TCP server's congestion control will be. Behind a link the run's is set in the
/// server's namespace where the kernel allows it (the host's default, or one of the host's
/// allowed list); an explicit `--cc` it would refuse is bad input, the default Cubic it would
/// refuse is recorded as not matched.
fn tcp_cc(asked: Option<qbench_core::CcAlgo>, link: bool) -> anyhow::Result<configs::TcpCc> {
    let current = host_sysctl("tcp_congestion_control");
    if !link {
        return Ok(configs::TcpCc::HostDefault(current));
    }
    let want = asked.unwrap_or(qbench_core::CcAlgo::Cubic).tcp_name();
    let allowed = host_sysctl("tcp_allowed_congestion_control");
    if want == current || allowed.split_whitespace().any(|a| a == want) {
        return Ok(configs::TcpCc::Set(want.to_string()));
    }
    if asked.is_some() {
        return Err(anyhow::Error::new(crate::error::ConfigError {
            flag: "--cc",
            message: format!(
                "{want} cannot be a network namespace's default here: the kernel allows only the host's net.ipv4.tcp_allowed_congestion_control ({allowed}) besides its default ({current})"
            ),
        }));
    }
    Ok(configs::TcpCc::NamespaceDefault {
        cc: current,
        allowed,
    })
}

/// `net.ipv4.tcp_congestion_control` of the namespace `ns` (the server's, qbench's own), set
/// again before each run: a comparison's other side may have set another.
fn set_tcp_cc(ns: &str, cc: &str) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-qw"])
        .arg(format!("net.ipv4.tcp_congestion_control={cc}"))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("--server: setting the server namespace's congestion control: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "--server: setting the server namespace's congestion control to {cc}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}
