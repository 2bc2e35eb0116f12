//! The benchmark command: start or find the server, build the transport, run, report.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qbench_core::ccstate::StateMachine;
use qbench_core::telemetry::Timeline;
use qbench_core::{CpuTimes, Report, ReportMeta, RunCpu, RunReport, ToolInfo};
use qbench_server::cpu::process_cpu;
use qbench_server::InProcess;
use qbench_shaper::Topology;

use crate::cli::Proto;
use crate::clock::Clock;
use crate::config::{Config, Origin, Target};
use crate::output::{summary, JsonSink};
use crate::runner::{run_once, Plan};
use crate::tls::{client_config, ticket_store, Trust};
use crate::transport::h1::H1;
use crate::transport::h2::H2;
use crate::transport::h3::H3;
use crate::transport::tcp::TlsTcp;
use crate::transport::{Endpoint, ObjectReq, Transport};

/// What the command ends with: the report, and whether every run was complete.
pub struct Outcome {
    pub complete: bool,
    pub error: Option<String>,
}

/// What must exist before the client runtime starts: the emulated link and the in-process
/// server inside it. Building it moves the calling thread into the client namespace, so the
/// client runtime's threads, created afterwards, live there too.
pub struct Prepared {
    /// Dropped before `link`, so the server stops before its namespace goes.
    server: Option<InProcess>,
    server_host: String,
    link: Option<Topology>,
}

impl Prepared {
    pub fn new(cfg: &Config) -> anyhow::Result<Prepared> {
        let Some(opts) = cfg.server.clone() else {
            return Ok(Prepared {
                server: None,
                server_host: String::new(),
                link: None,
            });
        };
        let threads = cfg.server_threads as usize;
        let (Some(spec), Some(topts)) = (&cfg.link, &cfg.link_options) else {
            let server =
                InProcess::start(opts, threads).context("starting the in-process server")?;
            return Ok(Prepared {
                server: Some(server),
                server_host: "127.0.0.1".into(),
                link: None,
            });
        };
        let link = Topology::up(spec.clone(), topts).context("--link")?;
        let (server_ns, client_ns) = (link.names().server.clone(), link.names().client.clone());
        let server = InProcess::start_in(opts, threads, move || {
            qbench_shaper::netns::enter(&server_ns).map_err(|e| e.to_string())
        })
        .context("starting the in-process server in the server namespace")?;
        qbench_shaper::netns::enter(&client_ns).context("--link: entering the client namespace")?;
        Ok(Prepared {
            server: Some(server),
            server_host: qbench_shaper::plan::SERVER_ADDR.into(),
            link: Some(link),
        })
    }
}

struct Peer {
    origin: Origin,
    endpoint: Endpoint,
    trust: Trust,
    description: String,
}

async fn resolve(origin: &Origin) -> anyhow::Result<std::net::SocketAddr> {
    let mut addrs = tokio::net::lookup_host((origin.host.as_str(), origin.port))
        .await
        .with_context(|| format!("unreachable: cannot resolve {}", origin.host))?;
    addrs
        .next()
        .with_context(|| format!("unreachable: {} has no address", origin.host))
}

fn trust_from(cfg: &Config) -> anyhow::Result<Trust> {
    if cfg.insecure {
        return Ok(Trust::Insecure);
    }
    match &cfg.ca {
        Some(path) => Ok(Trust::Pem {
            origin: path.display().to_string(),
            pem: std::fs::read_to_string(path)
                .with_context(|| format!("--ca: cannot read {}", path.display()))?,
        }),
        None => Ok(Trust::System),
    }
}

async fn peer(cfg: &Config, prepared: &Prepared) -> anyhow::Result<Peer> {
    let (origin, trust, description) = match (&cfg.target, &prepared.server) {
        (Target::InProcess, Some(server)) => {
            let origin = Origin {
                host: prepared.server_host.clone(),
                port: server.local_addr().port(),
            };
            let trust = Trust::Pem {
                origin: "in-process server".into(),
                pem: server.cert_pem().to_string(),
            };
            let what = match &cfg.link {
                Some(l) => format!("in-process qbench-server behind link {}", l.text),
                None => "in-process qbench-server".to_string(),
            };
            (origin, trust, what)
        }
        (Target::InProcess, None) => anyhow::bail!("the in-process server was not started"),
        (Target::Server { origin }, _) => {
            (origin.clone(), trust_from(cfg)?, "qbench-server".into())
        }
        (Target::Urls { origin, .. }, _) => (origin.clone(), trust_from(cfg)?, "URLs".into()),
    };
    let addr = match cfg.connect_to {
        Some(a) if prepared.server.is_none() => a,
        _ => resolve(&origin).await?,
    };
    Ok(Peer {
        endpoint: Endpoint {
            addr,
            server_name: origin.host.clone(),
            timeout: cfg.timeout,
            rwnd: cfg.rwnd.map(|r| r as u32),
        },
        origin,
        trust,
        description,
    })
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} objects {per_sec} eta {eta}")
            .expect("valid template"),
    );
    if std::io::stderr().is_terminal() {
        // Only runs longer than a second get a bar.
        let b = bar.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if !b.is_finished() {
                b.set_draw_target(ProgressDrawTarget::stderr());
            }
        });
    }
    bar
}

struct Ctx<'a> {
    cfg: &'a Config,
    plan: Plan,
    clock: Clock,
    server: Option<&'a InProcess>,
    link: Option<&'a Topology>,
    /// Make one connection before the runs (primes the TCP metrics cache for a window cap).
    prime: bool,
    meta: ReportMeta,
    sink: &'a JsonSink,
}

impl Ctx<'_> {
    fn report(&self, runs: Vec<RunReport>, aborted: Option<String>) -> anyhow::Result<Report> {
        let mut r = Report::new(self.meta.clone(), runs, self.cfg.runs as usize, aborted)?;
        r.link = self
            .link
            .map(|l| serde_json::to_value(l.report()))
            .transpose()?;
        Ok(r)
    }

    fn cpu_now(&self) -> (CpuTimes, Option<CpuTimes>) {
        (process_cpu(), self.server.map(|s| s.cpu()))
    }

    async fn run_all<T: Transport>(&self, t: &T) -> anyhow::Result<(Report, Option<String>)> {
        if self.prime {
            t.prime()
                .await
                .map_err(|e| anyhow::anyhow!("priming connection: {}: {}", e.kind, e.message))?;
        }
        let bar = progress_bar(self.plan.requests.len() as u64 * u64::from(self.cfg.runs));
        let mut runs = Vec::new();
        let mut warm = None;
        let mut aborted = None;
        for i in 0..self.cfg.runs {
            let (p0, s0) = self.cpu_now();
            let (mut rep, w) = run_once(t, i, &self.plan, self.clock, warm.take(), &bar).await;
            let (p1, s1) = self.cpu_now();
            let server = s0.zip(s1).map(|(a, b)| b.since(&a));
            let process = p1.since(&p0);
            let client = match server {
                Some(s) => process.since(&s),
                None => process,
            };
            rep.cpu = Some(RunCpu::new(client, server, rep.payload_bytes));
            let no_connection = rep.connections.iter().all(|c| c.error.is_some());
            runs.push(rep);
            warm = w;
            self.sink.write_partial(&self.report(runs.clone(), None)?)?;
            if no_connection {
                aborted = Some("no connection could be established".into());
                break;
            }
        }
        bar.finish_and_clear();
        let first_error = runs.iter().find_map(|r| {
            r.first_error
                .as_ref()
                .map(|e| format!("run {}: {e}", r.index))
        });
        Ok((self.report(runs, aborted)?, first_error))
    }
}

pub async fn run(
    cfg: Config,
    command: Vec<String>,
    prepared: &Prepared,
) -> anyhow::Result<Outcome> {
    let started_at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let sink = JsonSink::new(cfg.json.clone());
    let clock = Clock::start();
    let peer = peer(&cfg, prepared).await?;
    let requests = cfg
        .requests(&peer.origin)
        .into_iter()
        .map(|(uri, expected_len)| {
            Arc::new(ObjectReq {
                uri,
                expected_len,
                verify: cfg.verify,
            })
        })
        .collect();
    let ctx = Ctx {
        cfg: &cfg,
        plan: Plan {
            requests,
            connections: cfg.connections as usize,
            streams: cfg.streams.map(|s| s as usize),
            reuse: cfg.reuse,
            telemetry_uri: cfg.telemetry.then(|| {
                format!(
                    "https://{}{}",
                    peer.origin.authority(),
                    qbench_server::telemetry::PATH
                )
                .parse()
                .expect("valid URI")
            }),
        },
        clock,
        server: prepared.server.as_ref(),
        link: prepared.link.as_ref(),
        prime: cfg
            .link_options
            .as_ref()
            .is_some_and(|o| o.tcp_cwnd_cap.is_some()),
        meta: ReportMeta {
            tool: ToolInfo {
                name: "qbench".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            started_at,
            command,
            config: serde_json::to_value(&cfg)?,
            environment: crate::env::collect(),
        },
        sink: &sink,
    };
    let tickets = cfg.resume.then(ticket_store);
    let alpn = match cfg.proto {
        Proto::H1 => qbench_server::tls::ALPN_H1,
        Proto::H2 => qbench_server::tls::ALPN_H2,
        Proto::H3 => qbench_server::tls::ALPN_H3,
    };
    let tls = client_config(&peer.trust, alpn, tickets.clone(), cfg.zero_rtt)?;
    let ep = peer.endpoint.clone();
    let (report, first_error) = match cfg.proto {
        Proto::H1 => {
            let t = H1 {
                tcp: TlsTcp::new(ep, tls, tickets, alpn, false),
                clock,
            };
            ctx.run_all(&t).await?
        }
        Proto::H2 => {
            let t = H2 {
                tcp: TlsTcp::new(ep, tls, tickets, alpn, true),
                clock,
            };
            ctx.run_all(&t).await?
        }
        Proto::H3 => {
            let t = H3::new(ep, tls, tickets, cfg.zero_rtt, clock)
                .map_err(|e| anyhow::anyhow!("{}: {}", e.kind, e.message))?;
            let r = ctx.run_all(&t).await?;
            t.wait_idle().await;
            r
        }
    };
    sink.write_final(&report)?;
    write_cc_outputs(&cfg, &report)?;
    let headline = format!(
        "qbench {} -> {} ({}), {} over {} connection(s), {} run(s)",
        cfg.proto.as_str(),
        peer.origin.authority(),
        peer.description,
        cfg.objects.as_ref().map_or_else(
            || format!("{} URL fetches", cfg.total_objects),
            |w| w.to_string()
        ),
        cfg.connections,
        cfg.runs
    );
    let text = summary(&report, &headline);
    if sink.is_stdout() {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    let skipped = report.runs.len() < cfg.runs as usize;
    let error = (!report.complete).then(|| {
        let e = first_error.unwrap_or_else(|| "run incomplete".into());
        if skipped {
            format!("{e} (no connection could be established; remaining runs skipped)")
        } else {
            e
        }
    });
    Ok(Outcome {
        complete: report.complete,
        error,
    })
}

/// `--state-graph` (all runs' connections) and `--plot` (first run).
fn write_cc_outputs(cfg: &Config, report: &Report) -> anyhow::Result<()> {
    let title = format!(
        "{} {}{}",
        cfg.proto.as_str(),
        cfg.cc.unwrap_or("server default cc"),
        cfg.cwnd_cap
            .map_or(String::new(), |c| format!(", cwnd cap {c} packets"))
    );
    let timelines: Vec<&Timeline> = report
        .runs
        .iter()
        .flat_map(|r| r.telemetry.iter().flatten())
        .collect();
    if let Some(path) = &cfg.state_graph {
        anyhow::ensure!(
            !timelines.is_empty(),
            "--state-graph: the server sent no telemetry"
        );
        let dot = StateMachine::infer(&timelines).to_dot(&title);
        std::fs::write(path, dot)
            .with_context(|| format!("--state-graph: writing {}", path.display()))?;
    }
    if let Some(path) = &cfg.plot {
        let first = report.runs.first().and_then(|r| r.telemetry.as_ref());
        let lines: Vec<(String, &Timeline)> = first
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| (format!("{} {} connection {i}", t.transport, t.cc), t))
            .collect();
        anyhow::ensure!(!lines.is_empty(), "--plot: the server sent no telemetry");
        let svg = crate::plot::cwnd_chart(&format!("cwnd over time: {title}"), &lines);
        std::fs::write(path, svg).with_context(|| format!("--plot: writing {}", path.display()))?;
    }
    Ok(())
}
