//! What exists before the client runtime starts (the emulated link and the in-process
//! servers inside it), and how the client reaches a server.

use std::net::SocketAddr;

use anyhow::Context;
use qbench_server::InProcess;
use qbench_shaper::Topology;

use qbench_core::spec::{Origin, RunConfig, Target};
use qbench_core::ErrorKind;

use crate::client_cpu::ClientCpu;
use crate::config::Config;
use crate::tls::{client_config, Trust};
use crate::transport::tcp::TlsTcp;
use crate::transport::{Endpoint, FetchError};

/// Built before the client runtime: building it moves the calling thread into the client
/// namespace (with `--link`), so the runtime's threads, created afterwards, live there too.
pub struct Prepared {
    /// One in-process server per configuration under test (`None` for remote targets).
    /// Declared before `link` so the servers stop before their namespace goes.
    pub servers: Vec<Option<InProcess>>,
    server_host: String,
    pub link: Option<Topology>,
    /// `--client-cpu`/`--client-cpuset`: declared after the link, so that the client's
    /// threads leave the cgroup only after everything that ran in them is gone.
    pub cpu: Option<ClientCpu>,
    /// Whether the link locks TCP window metrics on the server's route toward the client.
    tcp_route_metrics: bool,
}

impl Prepared {
    /// `cfgs` share one link (the first one's, whose route settings its plan made common to
    /// all); each gets its own in-process server.
    pub fn new(cfgs: &[&Config]) -> anyhow::Result<Self> {
        let first = cfgs.first().context("nothing to run")?;
        let cpu = ClientCpu::new(cfgs)?;
        let mut tcp_route_metrics = false;
        let link = match (&first.spec().link, &first.link_options) {
            (Some(spec), Some(opts)) => {
                tcp_route_metrics = opts.tcp_cwnd_cap.is_some();
                Some(Topology::up(spec.clone(), opts).context("--link")?)
            }
            _ => None,
        };
        let mut servers = Vec::new();
        for cfg in cfgs {
            let Some(opts) = cfg.server.clone() else {
                servers.push(None);
                continue;
            };
            let threads = cfg.spec().server_threads as usize;
            let server = match &link {
                Some(l) => {
                    let ns = l.names().server.clone();
                    InProcess::start_in(opts, threads, move || {
                        qbench_shaper::netns::enter(&ns).map_err(|e| e.to_string())
                    })
                    .context("starting the in-process server in the server namespace")?
                }
                None => {
                    InProcess::start(opts, threads).context("starting the in-process server")?
                }
            };
            servers.push(Some(server));
        }
        let server_host = match &link {
            Some(l) => {
                qbench_shaper::netns::enter(&l.names().client)
                    .context("--link: entering the client namespace")?;
                qbench_shaper::plan::SERVER_ADDR.to_string()
            }
            None => "127.0.0.1".into(),
        };
        Ok(Self {
            servers,
            server_host,
            link,
            cpu,
            tcp_route_metrics,
        })
    }

    /// With a TCP window cap across the link: one complete TCP + TLS connection to each
    /// in-process server before measuring. The kernel applies a route's locked cwnd through
    /// its TCP metrics cache, which a closed connection fills.
    pub async fn prime_tcp_metrics(&self, cfgs: &[&Config]) -> anyhow::Result<()> {
        if !self.tcp_route_metrics {
            return Ok(());
        }
        for (cfg, server) in cfgs.iter().zip(&self.servers) {
            let Some(server) = server.as_ref().filter(|_| !cfg.spec().proto.is_quic()) else {
                continue;
            };
            let trust = Trust::Pem {
                origin: "in-process server".into(),
                pem: server.cert_pem().to_string(),
            };
            let alpn = cfg.spec().proto.alpn();
            let tls = client_config(&trust, alpn, None, false)?;
            let endpoint = Endpoint {
                addr: SocketAddr::new(
                    self.server_host
                        .parse()
                        .context("in-process server address")?,
                    server.local_addr().port(),
                ),
                server_name: self.server_host.clone(),
                timeout: cfg.spec().timeout,
                rwnd: None,
                reorder_threshold: None,
                reorder_time_threshold: None,
            };
            TlsTcp::new(endpoint, tls, None, alpn, false)
                .prime()
                .await
                .map_err(|e| anyhow::anyhow!("priming connection: {}: {}", e.kind, e.message))?;
        }
        Ok(())
    }
}

/// Where and how the client connects, with what it trusts.
pub(crate) struct Peer {
    pub origin: Origin,
    pub endpoint: Endpoint,
    pub trust: Trust,
    pub description: String,
}

async fn resolve(origin: &Origin) -> Result<SocketAddr, FetchError> {
    let unreachable = |what: String| FetchError::new(ErrorKind::Unreachable, what);
    let mut addrs = tokio::net::lookup_host((origin.host.as_str(), origin.port))
        .await
        .map_err(|e| unreachable(format!("cannot resolve {}: {e}", origin.host)))?;
    addrs
        .next()
        .ok_or_else(|| unreachable(format!("{} has no address", origin.host)))
}

fn trust_from(run: &RunConfig) -> anyhow::Result<Trust> {
    if run.insecure {
        return Ok(Trust::Insecure);
    }
    match &run.ca {
        Some(path) => Ok(Trust::Pem {
            origin: path.display().to_string(),
            pem: std::fs::read_to_string(path).map_err(|e| crate::config::ConfigError {
                flag: "--ca",
                message: format!(
                    "cannot read {}: {}",
                    path.display(),
                    qbench_core::errors::one_line(&e)
                ),
            })?,
        }),
        None => Ok(Trust::System),
    }
}

/// Whom to connect to and what to trust. The outer error is bad input (an unreadable
/// `--ca`); the inner one a network failure before any connection (a name that does not
/// resolve), which a report records.
pub(crate) async fn peer(
    cfg: &Config,
    server: Option<&InProcess>,
    prepared: &Prepared,
) -> anyhow::Result<Result<Peer, FetchError>> {
    let run = &cfg.run;
    let (origin, trust, description) = match (&run.target, server) {
        (Target::InProcess, Some(server)) => {
            let origin = Origin {
                host: prepared.server_host.clone(),
                port: server.local_addr().port(),
            };
            let trust = Trust::Pem {
                origin: "in-process server".into(),
                pem: server.cert_pem().to_string(),
            };
            let what = match &run.spec.link {
                Some(l) => format!("in-process qbench-server behind link {}", l.text),
                None => "in-process qbench-server".to_string(),
            };
            (origin, trust, what)
        }
        (Target::InProcess, None) => anyhow::bail!("the in-process server was not started"),
        (Target::Server { origin }, _) => {
            (origin.clone(), trust_from(run)?, "qbench-server".into())
        }
        (Target::Urls { origin, .. }, _) => (origin.clone(), trust_from(run)?, "URLs".into()),
    };
    let addr = match run.connect_to {
        Some(a) if server.is_none() => a,
        _ => match resolve(&origin).await {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        },
    };
    Ok(Ok(Peer {
        endpoint: Endpoint {
            addr,
            server_name: origin.host.clone(),
            timeout: run.spec.timeout,
            rwnd: run
                .spec
                .rwnd
                .map(|r| u32::try_from(r.0).unwrap_or(u32::MAX)),
            reorder_threshold: run.spec.reorder_threshold,
            reorder_time_threshold: run.spec.reorder_time_threshold,
        },
        origin,
        trust,
        description,
    }))
}
