//! What exists before the client runtime starts (the emulated link and the in-process
//! servers inside it), and how the client reaches a server.

use std::net::SocketAddr;

use anyhow::Context;
use qbench_server::InProcess;
use qbench_shaper::stop::Stop;
use qbench_shaper::{Topology, TopologyOptions};

use qbench_core::report::config::RunConfig;
use qbench_core::report::link::ProxyRun;
use qbench_core::spec::{Origin, Target};
use qbench_core::ErrorKind;

use std::sync::Arc;

use qbench_server::relay::{RelayStats, Upstream};

use crate::error::ConfigError;
use crate::observe::{Observer, Observing};
use crate::plan::config::Config;
use crate::setup::client_cpu::ClientCpu;
use crate::setup::server_cpu::ServerCpuLimit;
use crate::setup::server_program::ProgramServer;
use crate::transport::tcp::TlsTcp;
use crate::transport::tls::{client_config, log_keys, Trust};
use crate::transport::{Endpoint, FetchError};

/// Built before the client runtime: building it moves the calling thread into the client
/// namespace (with `--link`), so the runtime's threads, created afterwards, live there too.
pub(crate) struct Prepared {
    /// One in-process server per configuration under test (`None` for remote targets).
    /// Declared before the links so the servers stop before their namespaces go.
    pub servers: Vec<Option<InProcess>>,
    /// `--server-cpu` of each configuration's server: after the servers, so that their
    /// threads are gone before the limit is.
    pub server_cpu: Vec<Option<ServerCpuLimit>>,
    /// `--proxy`: the middle host's proxy of each configuration that fetches through one.
    pub proxies: Vec<Option<Proxy>>,
    /// `--server`: each configuration's server program, started for each of its runs.
    programs: Vec<Option<ProgramServer>>,
    /// Each configuration's address, to find its server program by.
    configs: Vec<usize>,
    /// Where each configuration's client connects.
    hosts: Vec<String>,
    pub link: Option<Topology>,
    /// `--link-b`: the server's segment beyond the middle host.
    pub link_b: Option<Topology>,
    /// `--client-cpu`/`--client-cpuset`: declared after the links, so that the client's
    /// threads leave the cgroup only after everything that ran in them is gone.
    pub cpu: Option<ClientCpu>,
    /// Whether the link locks TCP window metrics on the server's route toward the client.
    tcp_route_metrics: bool,
    /// What the sides' runs report their progress, intervals and warnings to.
    pub observer: Observing,
}

/// `qbench proxy` on a chain's middle host, in this process.
pub(crate) struct Proxy {
    pub server: InProcess,
    pub stats: Arc<RelayStats>,
    pub upstream: qbench_core::Protocol,
}

impl Proxy {
    /// Its counters now: requests, connects, connect failures, bytes up, bytes down, broken.
    pub(crate) fn relayed(&self) -> [u64; 6] {
        let s = &self.stats;
        [
            RelayStats::get(&s.requests),
            RelayStats::get(&s.connects),
            RelayStats::get(&s.connect_failures),
            RelayStats::get(&s.bytes_up),
            RelayStats::get(&s.bytes_down),
            RelayStats::get(&s.broken),
        ]
    }

    /// What it relayed since its counters were `before`, and its CPU.
    pub(crate) fn run_since(&self, before: [u64; 6], cpu: qbench_core::CpuTimes) -> ProxyRun {
        let now = self.relayed();
        ProxyRun {
            upstream: self.upstream,
            requests: now[0] - before[0],
            connects: now[1] - before[1],
            connect_failures: now[2] - before[2],
            bytes_up: now[3] - before[3],
            bytes_down: now[4] - before[4],
            broken: now[5] - before[5],
            cpu,
        }
    }
}

/// The proxy of `cfg` in the middle host (the near segment's server namespace), relaying to
/// `origin` beyond it and trusting only its certificate.
fn start_proxy(
    cfg: &Config,
    via: qbench_core::Protocol,
    origin: &InProcess,
    middle: String,
) -> anyhow::Result<Proxy> {
    let mut opts = cfg
        .server
        .clone()
        .context("the proxy needs the in-process server")?;
    let near = qbench_shaper::plan::SERVER_ADDR;
    opts.listen = format!("{near}:0").parse()?;
    opts.protocols = vec![cfg.spec().proto];
    opts.cert_names.push(near.to_string());
    // Its own sender toward the client is sampled, as the origin's would be.
    let threads = cfg.spec().server_threads as usize;
    let trust = Trust::Pem {
        origin: "in-process server".into(),
        pem: origin.cert_pem().to_string(),
    };
    let mut tls = client_config(&trust, via.alpn(), None, false)?;
    log_keys(&mut tls, cfg.key_log.as_ref());
    let far = qbench_shaper::plan::chain_server_addr();
    let addr = SocketAddr::new(far.parse()?, origin.local_addr().port());
    let stats = Arc::new(RelayStats::default());
    let (relay_stats, timeout) = (stats.clone(), cfg.spec().timeout);
    let enter_ns = middle.clone();
    let server = InProcess::start_relay_in(
        opts,
        threads,
        move || qbench_shaper::netns::enter(&enter_ns).map_err(|e| e.to_string()),
        move || {
            let endpoint = match via {
                qbench_core::Protocol::H3 => Some(
                    quinn::Endpoint::client("0.0.0.0:0".parse().expect("literal"))
                        .map_err(|e| format!("the proxy's QUIC endpoint: {e}"))?,
                ),
                _ => None,
            };
            Ok(Upstream {
                proto: via,
                addr,
                server_name: far,
                tls: Arc::new(tls),
                endpoint,
                timeout,
                stats: relay_stats,
            })
        },
    )
    .context("starting the proxy on the middle host")?;
    Ok(Proxy {
        server,
        stats,
        upstream: via,
    })
}

/// The link of `first` (`--link`), and the server's segment beyond it (`--link-b`), each
/// stopped as soon as a stopping signal comes: a link settles and is measured for a round trip
/// or more, which on a long link is long, and the signal is reported as the interruption.
fn links(first: &Config) -> anyhow::Result<(Option<Topology>, Option<Topology>)> {
    let stoppable = |opts: &TopologyOptions| TopologyOptions {
        stop: Stop::when(|| crate::signals::first().is_some()),
        ..opts.clone()
    };
    let interrupted = || crate::signals::check("the link was being built");
    let link = match (&first.spec().link, &first.link_options) {
        (Some(spec), Some(opts)) => {
            let up = Topology::up(spec.clone(), &stoppable(opts));
            interrupted()?;
            Some(up.map_err(link_error)?)
        }
        _ => None,
    };
    interrupted()?;
    let link_b = match (&link, &first.spec().link_b, &first.link_options) {
        (Some(near), Some(spec), Some(opts)) => {
            let up = Topology::up_beyond(spec.clone(), &stoppable(opts), near);
            interrupted()?;
            Some(up.context("--link-b")?)
        }
        _ => None,
    };
    Ok((link, link_b))
}

/// The in-process server of each configuration that has one, inside `far`'s server namespace
/// when there is a link, with its `--server-cpu` limit in force on every worker thread.
fn start_servers(cfgs: &[&Config], far: Option<&Topology>) -> anyhow::Result<Servers> {
    // Declared first, dropped last: on an error the servers go before their limits.
    let (mut limits, mut servers) = (Vec::new(), Vec::new());
    let mut shared = None;
    for cfg in cfgs {
        let Some(opts) = cfg.server.clone() else {
            servers.push(None);
            limits.push(None);
            continue;
        };
        let threads = cfg.spec().server_threads as usize;
        let limit = match cfg.spec().server_cpu {
            Some(l) => {
                let client_cpus = client_cpus(cfg);
                let stealer = crate::setup::server_cpu::stealer(l, &client_cpus, &mut shared)?;
                Some(ServerCpuLimit::new(l, threads, stealer)?)
            }
            None => None,
        };
        let hook = limit.as_ref().map(ServerCpuLimit::hook);
        let server = match far {
            Some(l) => {
                let ns = l.names().server.clone();
                let enter = move || qbench_shaper::netns::enter(&ns).map_err(|e| e.to_string());
                InProcess::start_in(opts, threads, enter, hook)
                    .context("starting the in-process server in the server namespace")?
            }
            None => InProcess::start_in(opts, threads, || Ok(()), hook)
                .context("starting the in-process server")?,
        };
        servers.push(Some(server));
        limits.push(limit);
        if let Some(l) = limits.last().and_then(Option::as_ref) {
            l.confirm()?;
        }
    }
    Ok((limits, servers))
}

/// The CPUs `cfg`'s client is pinned to, as asked (`--client-cpuset`).
fn client_cpus(cfg: &Config) -> Vec<u16> {
    (cfg.spec().client_cpuset.iter())
        .flat_map(|s| s.cpus())
        .collect()
}

type Servers = (Vec<Option<ServerCpuLimit>>, Vec<Option<InProcess>>);

/// The proxy of each configuration that fetches through one (on a chain of two links), and
/// where each configuration's client connects: its proxy, or its server.
fn start_proxies(
    cfgs: &[&Config],
    servers: &[Option<InProcess>],
    link: Option<&Topology>,
    link_b: Option<&Topology>,
) -> anyhow::Result<(Vec<Option<Proxy>>, Vec<String>)> {
    let mut proxies = Vec::new();
    let mut hosts = Vec::new();
    for (cfg, server) in cfgs.iter().zip(servers) {
        let proxy = match (cfg.spec().proxy, server, link, link_b) {
            (Some(via), Some(origin), Some(near), Some(_)) => {
                Some(start_proxy(cfg, via, origin, near.names().server.clone())?)
            }
            _ => None,
        };
        hosts.push(match (&proxy, link_b, link) {
            (Some(_), _, _) | (None, None, Some(_)) => qbench_shaper::plan::SERVER_ADDR.to_string(),
            (None, Some(_), _) => qbench_shaper::plan::chain_server_addr(),
            (None, None, None) => "127.0.0.1".into(),
        });
        proxies.push(proxy);
    }
    Ok((proxies, hosts))
}

/// A rate trace that cannot be read or parsed is bad input (status 2), like any other
/// `--link` field; anything else that fails while building the link is not.
fn link_error(e: qbench_shaper::topology::ShaperError) -> anyhow::Error {
    use qbench_shaper::rate::RateError;
    use qbench_shaper::topology::ShaperError;
    match e {
        ShaperError::Rate(r @ (RateError::Read { .. } | RateError::Parse { .. })) => ConfigError {
            flag: "--link",
            message: r.to_string(),
        }
        .into(),
        e => anyhow::Error::new(e).context("--link"),
    }
}

impl Prepared {
    /// `cfgs` share one link (the first one's, whose route settings its plan made common to
    /// all); each gets its own in-process server, and its own proxy if it asks for one.
    pub(crate) fn new(cfgs: &[&Config], observer: &Observing) -> anyhow::Result<Self> {
        let first = cfgs.first().context("nothing to run")?;
        crate::signals::hold()?;
        crate::signals::check("starting")?;
        let cpu = ClientCpu::new(cfgs)?;
        let (link, link_b) = links(first)?;
        crate::signals::check("the link was being built")?;
        for (flag, l) in [("--link", &link), ("--link-b", &link_b)] {
            let misses = l
                .iter()
                .filter_map(|t| t.calibration())
                .flat_map(|c| c.misses());
            for m in misses {
                observer.warn(&format!("warning: {flag}: {}", m.line()));
            }
        }
        let tcp_route_metrics = link.is_some()
            && (first.link_options.as_ref()).is_some_and(|o| o.tcp_cwnd_cap.is_some());
        // The servers live at the far end: beyond the middle host when there is one.
        let (server_cpu, servers) = start_servers(cfgs, link_b.as_ref().or(link.as_ref()))?;
        let (proxies, hosts) = start_proxies(cfgs, &servers, link.as_ref(), link_b.as_ref())?;
        let far = link_b.as_ref().or(link.as_ref());
        let programs = (cfgs.iter().zip(&hosts))
            .map(|(cfg, host)| {
                let Some(kind) = &cfg.spec().server else {
                    return Ok(None);
                };
                let ns = far.map(|l| l.names().server.clone());
                ProgramServer::new(cfg, kind, ns, host.clone()).map(Some)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        crate::signals::check("the servers were being started")?;
        if let Some(l) = &link {
            qbench_shaper::netns::enter(&l.names().client)
                .context("--link: entering the client namespace")?;
        }
        Ok(Self {
            servers,
            server_cpu,
            proxies,
            programs,
            configs: cfgs
                .iter()
                .map(|c| std::ptr::from_ref(*c) as usize)
                .collect(),
            hosts,
            link,
            link_b,
            cpu,
            tcp_route_metrics,
            observer: observer.clone(),
        })
    }

    /// Which configuration `server` serves (its index in `servers`).
    fn index_of(&self, server: &InProcess) -> Option<usize> {
        self.servers
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| std::ptr::eq(s, server)))
    }

    /// `cfg`'s server program (`--server`), with its index among the configurations.
    pub(crate) fn program_of(&self, cfg: &Config) -> Option<(usize, &ProgramServer)> {
        let at = std::ptr::from_ref(cfg) as usize;
        let i = self.configs.iter().position(|c| *c == at)?;
        Some((i, self.programs.get(i)?.as_ref()?))
    }

    /// The `--server-cpu` limit of `server`, if any.
    pub(crate) fn server_cpu_for(&self, server: Option<&InProcess>) -> Option<&ServerCpuLimit> {
        let i = self.index_of(server?)?;
        self.server_cpu.get(i)?.as_ref()
    }

    /// The proxy the configuration of `server` fetches through, if any.
    pub(crate) fn proxy_for(&self, server: Option<&InProcess>) -> Option<&Proxy> {
        let i = self.index_of(server?)?;
        self.proxies.get(i)?.as_ref()
    }

    /// With a TCP window cap across the link: one complete TCP + TLS connection to each
    /// in-process server before measuring. The kernel applies a route's locked cwnd through
    /// its TCP metrics cache, which a closed connection fills.
    pub(crate) async fn prime_tcp_metrics(&self, cfgs: &[&Config]) -> anyhow::Result<()> {
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
            let mut tls = client_config(&trust, alpn, None, false)?;
            log_keys(&mut tls, cfg.key_log.as_ref());
            let host = qbench_shaper::plan::SERVER_ADDR;
            let endpoint = Endpoint {
                addr: SocketAddr::new(
                    host.parse().context("in-process server address")?,
                    server.local_addr().port(),
                ),
                server_name: host.to_string(),
                timeout: cfg.spec().timeout,
                rwnd: None,
                reorder_threshold: None,
                reorder_time_threshold: None,
                quic: Default::default(),
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
            pem: crate::setup::input::read_text(
                path,
                qbench_core::spec::input::MAX_PEM_BYTES,
                "a PEM file",
            )
            .map_err(|e| ConfigError {
                flag: "--ca",
                message: format!("cannot read {e}"),
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
            let host = prepared
                .index_of(server)
                .and_then(|i| prepared.hosts.get(i))
                .cloned()
                .context("the in-process server has no address")?;
            // Through a proxy, the client speaks to the proxy and trusts its certificate.
            let end = prepared
                .proxy_for(Some(server))
                .map_or(server, |p| &p.server);
            let origin = Origin {
                host,
                port: end.local_addr().port(),
            };
            let trust = Trust::Pem {
                origin: "in-process server".into(),
                pem: end.cert_pem().to_string(),
            };
            let what = match (&run.spec.link, &run.spec.link_b, run.spec.proxy) {
                (Some(a), Some(b), Some(via)) => format!(
                    "in-process qbench-server behind link {} + {}, through qbench proxy (upstream {via})",
                    a.text, b.text
                ),
                (Some(a), Some(b), None) => format!(
                    "in-process qbench-server behind link {} + {}, direct",
                    a.text, b.text
                ),
                (Some(l), None, _) => format!("in-process qbench-server behind link {}", l.text),
                _ => "in-process qbench-server".to_string(),
            };
            (origin, trust, what)
        }
        (Target::InProcess, None) => {
            let (i, program) = prepared
                .program_of(cfg)
                .context("the in-process server was not started")?;
            let host = prepared
                .hosts
                .get(i)
                .cloned()
                .context("the server has no address")?;
            let origin = Origin {
                host,
                port: program.port,
            };
            let trust = Trust::Pem {
                origin: format!("{}'s certificate", program.kind.name()),
                pem: program.cert_pem.clone(),
            };
            let what = match (&run.spec.link, &run.spec.link_b) {
                (Some(a), Some(b)) => {
                    format!("{} behind link {} + {}", program.describe(), a.text, b.text)
                }
                (Some(l), None) => format!("{} behind link {}", program.describe(), l.text),
                _ => format!("{} on loopback", program.describe()),
            };
            (origin, trust, what)
        }
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
            quic: run.spec.quic,
        },
        origin,
        trust,
        description,
    }))
}
