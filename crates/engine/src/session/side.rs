//! One configuration under test, ready to run again and again: its transport, request plan,
//! CPU accounting and the report its runs add up to.

use std::sync::Arc;

use crate::measure::cpu::{
    all_threads, delay_line_cpu, machine_cpu, process_cpu, role_cpu, role_times,
};
use crate::measure::net_counters;
use qbench_core::report::link::LinkDrops;
use qbench_core::spec::cpulimit::Throttling;
use qbench_core::stats::noise::{forwarder_deltas, CpuStat, RunNoise, STEAL_THRESHOLD_PCT};
use qbench_core::{CpuTimes, Report, ReportMeta, RunCpu, RunReport};
use qbench_server::InProcess;
use qbench_shaper::topology::LinkSnapshot;
use qbench_shaper::Topology;
use qbench_stack::activity::{CLIENT_TCP, SERVER_TCP};

use super::meta::report_meta;
use crate::drive::requests::Requests;
use crate::drive::runner::{Plan, Runner};
use crate::measure::clock::Clock;
use crate::observe::Started;
use crate::plan::config::Config;
use crate::setup::prepare::{Peer, Prepared, Proxy};
use crate::transport::h1::H1;
use crate::transport::h2::H2;
use crate::transport::h3::H3;
use crate::transport::tcp::TlsTcp;
use crate::transport::tls::{client_config, log_keys, ticket_store};
use crate::transport::Transport;
use qbench_core::report::sender::SenderSetup;
use qbench_core::report::spread::{RoleCpu, ThreadRole};
use qbench_core::report::Spread;
use qbench_core::spec::RunSpec;
use qbench_core::{CcAlgo, Protocol};

/// The loopback interface's MTU, on which the in-process server runs without a link.
const LOOPBACK_MTU: u32 = 65_536;

pub(crate) struct Side<'a> {
    pub peer: Peer,
    runner: crate::session::driver::Driver,
    server: Option<&'a InProcess>,
    link: Option<&'a Topology>,
    link_b: Option<&'a Topology>,
    /// `--proxy`: the middle host's proxy this side fetches through.
    proxy: Option<&'a Proxy>,
    cpu: Option<&'a crate::setup::client_cpu::ClientCpu>,
    server_cpu: Option<&'a crate::setup::server_cpu::ServerCpuLimit>,
    /// `--server`: the program started for each run in qbench-server's place.
    program: Option<&'a crate::setup::server_program::ProgramServer>,
    /// `--client-cpu` of this side (`None`: no quota while it runs).
    client_cpu: Option<f64>,
    meta: ReportMeta,
    pub runs: Vec<RunReport>,
    /// `--shard` and `--start-at`, recorded in every report written.
    pub shard: Option<qbench_core::report::ShardRecord>,
    pub start: Option<qbench_core::spec::start::StartRecord>,
    /// Steal above this (percent) flags a run as noisy.
    pub steal_threshold: f64,
    /// What the side's runs report their progress, intervals and warnings to.
    observer: crate::observe::Observing,
}

impl<'a> Side<'a> {
    pub(crate) fn new(
        cfg: &'a Config,
        server: Option<&'a InProcess>,
        prepared: &'a Prepared,
        peer: Peer,
        meta: ReportMeta,
        clock: Clock,
    ) -> anyhow::Result<Self> {
        let spec = cfg.spec();
        let plan = plan(cfg, &peer);
        // A closed or open loop's connections stay on one thread each, with their requests'
        // tasks and (h3) their endpoints. An app's player hands out requests from the calling
        // runtime, so its connections stay there.
        let no_app = spec.video.is_none() && spec.page.is_none();
        // A thread with no connection would run nothing.
        let lanes = (spec.client_threads as usize).min(plan.connections);
        let pinned = if lanes > 1 && no_app {
            let on_start = prepared
                .cpu
                .as_ref()
                .map(|c| Arc::new(c.on_thread_start()) as crate::transport::pinned::OnStart);
            Some(
                crate::transport::pinned::Pinned::start(lanes, on_start)
                    .map_err(|e| anyhow::anyhow!("starting the client's threads: {e}"))?,
            )
        } else {
            None
        };
        let mut meta = meta;
        crate::measure::env::complete(
            &mut meta.environment,
            peer.endpoint.addr,
            prepared.link.is_some(),
            spec.proto == Protocol::H3,
            &prepared.observer,
        );
        let runner = match &spec.client {
            Some(program) => crate::session::driver::Driver::Third {
                client: Box::new(super::third_party_side::third_party(
                    program, cfg, &peer, &plan, server, prepared, clock,
                )?),
                stop: Arc::default(),
            },
            None => {
                let transport = transport(cfg, &peer, clock, pinned.as_ref())?;
                let mut runner = Runner::new(transport, plan, clock);
                if let Some(p) = pinned {
                    runner.pin(p);
                }
                crate::session::driver::Driver::Own(Box::new(runner))
            }
        };
        Ok(Side {
            peer,
            runner,
            server,
            link: prepared.link.as_ref(),
            link_b: prepared.link_b.as_ref(),
            proxy: prepared.proxy_for(server),
            cpu: prepared.cpu.as_ref(),
            server_cpu: prepared.server_cpu_for(server),
            program: prepared.program_of(cfg).map(|(_, p)| p),
            client_cpu: spec.client_cpu,
            meta,
            runs: Vec::new(),
            shard: None,
            start: None,
            steal_threshold: STEAL_THRESHOLD_PCT,
            observer: prepared.observer.clone(),
        })
    }

    /// Resolves the peer and builds the side; failing before a connection is an error here
    /// (comparisons and competitions run against in-process servers).
    pub(crate) async fn open(
        cfg: &'a Config,
        server: Option<&'a InProcess>,
        prepared: &'a Prepared,
        command: Vec<String>,
        clock: Clock,
    ) -> anyhow::Result<Side<'a>> {
        let peer = crate::setup::prepare::peer(cfg, server, prepared)
            .await?
            .map_err(|e| anyhow::anyhow!("{}: {}", e.kind, e.message))?;
        Side::new(
            cfg,
            server,
            prepared,
            peer,
            report_meta(cfg, command),
            clock,
        )
    }

    /// Objects per run.
    pub(crate) fn objects(&self) -> u64 {
        self.runner.objects()
    }

    /// What the observer is told of this side, configured by `cfg`, as its runs begin.
    pub(crate) fn started<'s>(&'s self, cfg: &'s Config, authority: &'s str) -> Started<'s> {
        Started {
            spec: cfg.spec(),
            objects: self.objects(),
            total_objects: cfg.run.total_objects,
            authority,
            description: &self.peer.description,
            meta: &self.meta,
        }
    }

    /// The process's CPU, and that of the in-process servers this side uses (the origin and
    /// its proxy), which are not the client's.
    fn cpu_now(&self) -> (CpuTimes, Option<CpuTimes>, Option<CpuTimes>) {
        (
            process_cpu(),
            self.server.map(|s| s.cpu()),
            self.proxy.map(|p| p.server.cpu()),
        )
    }

    /// The threads and sockets this side's run went through.
    fn spread(&self, rep: &RunReport, roles: Vec<RoleCpu>) -> Spread {
        let workers = self
            .runner
            .pinned_threads()
            .unwrap_or_else(|| tokio::runtime::Handle::current().metrics().num_workers());
        Spread {
            roles,
            client_threads: workers as u32,
            client_sockets: Spread::client_sockets(&rep.connections),
            server_threads: self.server.map(|s| s.worker_threads() as u32),
            server_udp_sockets: self.server.map(|s| s.udp_sockets() as u32),
        }
    }

    /// One run; its report is appended to `runs` and returned.
    pub(crate) async fn run(&mut self, index: u32) -> &RunReport {
        let objects = self.objects();
        let program = match super::served::start(self.program, index, objects, &self.observer).await
        {
            Ok(p) => p,
            Err(rep) => {
                self.runs.push(rep);
                return self.runs.last().expect("just pushed");
            }
        };
        // The sides of a comparison take turns, each under its own quota.
        let quota = self.cpu.map(|c| c.apply(self.client_cpu));
        let throttled0 = self.cpu.and_then(|c| c.throttling());
        let server_throttled0 = self.server_cpu.and_then(|c| c.throttling());
        let stealer0 = self.server_cpu.and_then(|c| c.stealer_cpu());
        // The link's drops are read with tc, outside the machine's CPU readings: that is
        // qbench's bookkeeping, not other work on the machine during the run.
        let k0 = self.link.map(Topology::snapshot);
        let net0 = net_counters::read(self.link, self.link_b);
        let m0 = machine_cpu();
        let (p0, s0, x0) = self.cpu_now();
        let tcp0 = (CLIENT_TCP.snapshot(), SERVER_TCP.snapshot());
        let relayed0 = self.proxy.map(Proxy::relayed);
        let (threads0, wall) = (all_threads(), std::time::Instant::now());
        // Only a link has forwarder threads: other runs read /proc no more than before.
        let link0 = self.link.map(|_| role_times(ThreadRole::Link));
        if let Some(l) = self.server_cpu {
            l.resume();
        }
        let mut rep = self.runner.run(index, &self.observer).await;
        if let Some(l) = self.server_cpu {
            l.pause();
        }
        let link = link0.map(|l0| role_times(ThreadRole::Link).since(&l0));
        let (threads1, elapsed) = (all_threads(), wall.elapsed());
        let roles = role_cpu(&threads0, &threads1, elapsed);
        let delay_line = self
            .link
            .and_then(|_| delay_line_cpu(&threads0, &threads1, elapsed));
        let (p1, s1, x1) = self.cpu_now();
        let tcp1 = (CLIENT_TCP.snapshot(), SERVER_TCP.snapshot());
        let m1 = machine_cpu();
        let k1 = self.link.map(Topology::snapshot);
        if let Some(p) = program {
            super::served::stop(p, &mut rep).await;
        }
        rep.net = net_counters::between(
            net0,
            net_counters::read(self.link, self.link_b),
            (
                self.runner.udp_buffers(),
                self.server.and_then(InProcess::udp_buffers),
            ),
        );
        rep.noise = self.noise(m0.zip(m1), k0.as_ref().zip(k1.as_ref()));
        if let (Some(topo), Some(a), Some(b)) = (self.link, &k0, &k1) {
            rep.link_check = topo.run_check(a, b, delay_line);
        }
        let server = s0.zip(s1).map(|(a, b)| b.since(&a));
        let program_cpu = super::served::cpu(&rep);
        let proxy_cpu = x0.zip(x1).map(|(a, b)| b.since(&a));
        let process = p1.since(&p0);
        // A third-party client's processes are the measurement too, not other work: a
        // browser's CPU would otherwise flag every one of its runs as noisy.
        let programs = rep.third_party.as_ref().map_or(0.0, |t| {
            let (user_s, sys_s) = t.cpu();
            user_s + sys_s
        }) + program_cpu.as_ref().map_or(0.0, CpuTimes::total_s);
        if let Some(n) = rep.noise.as_mut() {
            n.count_own(
                process.total_s() + programs,
                crate::measure::cpu::clock_ticks_per_second(),
            );
        }
        let mut client = match server {
            Some(s) => process.since(&s),
            None => process,
        };
        if let Some(x) = proxy_cpu {
            client = client.since(&x);
        }
        // The userspace link's forwarders run in this process but are not the client.
        // Nor is what takes the sliced server's CPU (`--server-cpu steal:`).
        let stealer = self.server_cpu.and_then(|c| c.stealer_cpu());
        if let Some((a, b)) = stealer0.zip(stealer) {
            client = client.since(&b.since(&a));
        }
        let link = link.filter(|l| l.total_s() > 0.0);
        if let Some(l) = &link {
            client = client.since(l);
        }
        rep.proxy = (self.proxy.zip(relayed0).zip(proxy_cpu)).map(|((p, r), c)| p.run_since(r, c));
        if let Some(t) = &rep.third_party {
            // The client is the program's processes (and what they waited for), not qbench.
            let (user_s, sys_s) = t.cpu();
            client = CpuTimes {
                user_s,
                sys_s,
                ..CpuTimes::default()
            };
        }
        let mut cpu = RunCpu::new(client, server.or(program_cpu), rep.payload_bytes)
            .per_object(rep.objects.completed);
        cpu.link = link;
        cpu.client_tcp = tcp1.0.since(&tcp0.0);
        // An in-process server's calls, unless a proxy's are mixed in with them.
        cpu.server_tcp = (server.is_some() && self.proxy.is_none())
            .then(|| tcp1.1.since(&tcp0.1))
            .flatten();
        rep.cpu = Some(cpu);
        self.record_quota(&mut rep, quota, throttled0.as_ref());
        if let Some(limit) = self.server_cpu {
            rep.server_cpu = limit.record(server_throttled0.as_ref());
            if rep.server_cpu.is_none() && rep.complete {
                rep.complete = false;
                rep.first_error = Some("--server-cpu: the limit was not in force on every server thread at the run's end".into());
            }
        }
        rep.spread = Some(self.spread(&rep, roles));
        qbench_stack::qlog::flush_all();
        self.runs.push(rep);
        self.runs.last().expect("just pushed")
    }

    /// The machine's other work during a run, with the link's forwarders and drops, from the
    /// machine's CPU counters and the link's snapshots before and after it.
    fn noise(
        &self,
        machine: Option<(CpuStat, CpuStat)>,
        link: Option<(&LinkSnapshot, &LinkSnapshot)>,
    ) -> Option<RunNoise> {
        let (m0, m1) = machine?;
        let mut n = RunNoise::between(&m0, &m1, self.steal_threshold)?;
        if let Some((a, b)) = link {
            n.forwarders = forwarder_deltas(a.forwarders(), b.forwarders());
            n.link_drops = a.counters().zip(b.counters()).map(|(a, b)| {
                let d = b.since(a);
                LinkDrops {
                    up: d.up.dropped,
                    down: d.down.dropped,
                }
            });
        }
        Some(n)
    }

    /// `--client-cpu`: the quota the run ran under, recorded; a run whose quota could not be
    /// set, or was gone by its end, is not the client asked for and does not count.
    fn record_quota(
        &self,
        rep: &mut RunReport,
        quota: Option<anyhow::Result<()>>,
        throttled0: Option<&Throttling>,
    ) {
        if let Some(c) = self.cpu {
            let record = c.record(self.client_cpu, throttled0);
            if self.client_cpu.is_some() && record.quota_us.is_none() && rep.complete {
                rep.complete = false;
                rep.first_error = Some(format!(
                    "--client-cpu: the quota was no longer in force at the run's end ({})",
                    record.cgroup.as_deref().unwrap_or("no cgroup")
                ));
            }
            rep.client_cpu = Some(record);
        }
        if let Some(Err(e)) = quota {
            rep.complete = false;
            rep.first_error = Some(format!("{e:#}"));
        }
    }

    /// How the in-process server's sender starts a connection; `None` for a remote server.
    fn sender(&self) -> Option<SenderSetup> {
        let records = self.server?.tls_records();
        let spec = &self.meta.config.spec;
        if spec.proto.is_quic() {
            let asked = spec.initial_cwnd.map(|p| u64::from(p) * 1200);
            let w = qbench_server::cc::quic_initial_window(spec.cc.unwrap_or(CcAlgo::Cubic), asked);
            return Some(SenderSetup::quic(
                w,
                asked.is_some(),
                spec.quic.mtu_discovery != Some(false),
            ));
        }
        let key = "net.ipv4.tcp_mtu_probing";
        let (mtu, probing) = match self.link {
            Some(l) => (
                spec.link.as_ref().and_then(|k| k.mtu).unwrap_or(1500),
                l.server_sysctl(key).map(str::to_string),
            ),
            // The in-process server on loopback: lo's MTU, the host's sysctl.
            None => (
                LOOPBACK_MTU,
                std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mtu_probing").ok(),
            ),
        };
        let probing = probing.and_then(|p| p.trim().parse().ok()).unwrap_or(0);
        // A TCP initial window is a route metric, set only across a link.
        let initcwnd = spec.initial_cwnd.filter(|_| self.link.is_some());
        Some(SenderSetup::tcp(initcwnd, mtu, probing, records))
    }

    /// The link's segments this side runs over, each with the flag that asked for it.
    pub(crate) fn links(&self) -> impl Iterator<Item = (&'static str, &'a Topology)> {
        [("--link", self.link), ("--link-b", self.link_b)]
            .into_iter()
            .filter_map(|(flag, l)| Some((flag, l?)))
    }

    pub(crate) fn report(
        &self,
        expected_runs: usize,
        aborted: Option<String>,
    ) -> anyhow::Result<Report> {
        let mut meta = self.meta.clone();
        meta.config.sender = self.sender();
        let mut r = Report::new(meta, self.runs.clone(), expected_runs, aborted)?;
        r.link = self.link.map(Topology::report);
        r.link_b = self.link_b.map(Topology::report);
        r.shard = self.shard.clone();
        r.start = self.start.clone();
        Ok(r)
    }

    /// Drops the last run (a noisy round to be run again).
    pub(crate) fn discard_last(&mut self) -> Option<RunReport> {
        self.runs.pop()
    }

    /// The first error of any run, for the one-line message.
    pub(crate) fn first_error(&self) -> Option<String> {
        self.runs.iter().find_map(|r| {
            r.first_error
                .as_ref()
                .map(|e| format!("run {}: {e}", r.index))
        })
    }

    pub(crate) fn stopper(&self) -> Arc<crate::drive::until::Stop> {
        self.runner.stopper()
    }

    pub(crate) fn stops_fixed_runs(&self) -> bool {
        self.runner.stops_fixed_runs()
    }

    pub(crate) fn log_requests(&mut self, log: Arc<crate::drive::reqlog::RequestLog>) {
        self.runner.log_requests(log, &self.observer);
    }

    /// Lets QUIC peers see our CONNECTION_CLOSE before the endpoint goes away.
    pub(crate) async fn finish(&mut self) {
        self.runner.finish().await;
        qbench_stack::qlog::flush_all();
    }
}

/// What each run of `cfg` fetches from `peer`, and how: with `--shard`, this shard's part.
fn plan(cfg: &Config, peer: &Peer) -> Plan {
    let spec = cfg.spec();
    let mut requests = Requests::of(cfg, &peer.origin.authority());
    let mut load = spec.load.clone();
    let mut connections = u64::from(spec.connections);
    if let Some(s) = spec.shard {
        connections = s.share(connections);
        match &mut load {
            // A held load cycles through the whole mix on this shard's connections.
            Some(l) => {
                if let Some(r) = &mut l.rate {
                    *r = s.rate(*r);
                    l.max_inflight = s.share(l.max_inflight.into()) as u32;
                }
            }
            None => requests = requests.shard(s),
        }
    }
    Plan {
        requests: Arc::new(requests),
        connections: connections as usize,
        streams: spec.streams.map(|s| s as usize),
        reuse: spec.reuse,
        telemetry_uri: spec.telemetry.then(|| telemetry_uri(cfg, peer)),
        cwnd_cap: spec.cwnd_cap,
        load,
        shard: spec.shard,
        log: None,
        interval: spec.interval,
        app: app_plan(spec, &peer.origin.authority()),
    }
}

/// Where each connection's sender telemetry is fetched from after a run.
fn telemetry_uri(cfg: &Config, peer: &Peer) -> http::Uri {
    let query = cfg
        .telemetry_token
        .as_ref()
        .map(|t| format!("?token={t}"))
        .unwrap_or_default();
    format!(
        "https://{}{}{query}",
        peer.origin.authority(),
        qbench_core::wire::TELEMETRY_PATH
    )
    .parse()
    .expect("valid URI: the token was checked to be URI-safe")
}

/// The client's transport to `peer` for `cfg`'s protocol, resuming sessions with `--resume`,
/// logging keys and qlogs where `cfg` says.
fn transport(
    cfg: &Config,
    peer: &Peer,
    clock: Clock,
    pinned: Option<&crate::transport::pinned::Pinned>,
) -> anyhow::Result<Box<dyn Transport>> {
    let spec = cfg.spec();
    let tickets = spec.resume.then(ticket_store);
    let alpn = spec.proto.alpn();
    let mut tls = client_config(&peer.trust, alpn, tickets.clone(), spec.zero_rtt)?;
    log_keys(&mut tls, cfg.key_log.as_ref());
    let ep = peer.endpoint.clone();
    Ok(match spec.proto {
        Protocol::H1 => Box::new(H1 {
            tcp: TlsTcp::new(ep, tls, tickets, alpn, false),
            clock,
        }),
        Protocol::H2 => Box::new(H2 {
            tcp: TlsTcp::new(ep, tls, tickets, alpn, true),
            clock,
            turn_bytes: crate::transport::turns::turn_bytes(
                (spec.connections as usize).div_ceil(client_threads(pinned)),
            ),
        }),
        Protocol::H3 => Box::new(
            H3::new(
                ep,
                tls,
                tickets,
                spec.zero_rtt,
                clock,
                spec.connections as usize,
                pinned,
            )
            .map_err(|e| anyhow::anyhow!("{}: {}", e.kind, e.message))?
            .qlog_to(cfg.qlog.clone()),
        ),
    })
}

/// Threads the connections are spread over: the pinned runtimes, or the calling runtime's
/// workers.
fn client_threads(pinned: Option<&crate::transport::pinned::Pinned>) -> usize {
    pinned.map_or_else(
        || {
            tokio::runtime::Handle::try_current()
                .map_or(1, |h| h.metrics().num_workers())
                .max(1)
        },
        |p| p.threads().max(1),
    )
}

/// The video or page `spec` asks for, fetched from `authority`.
fn app_plan(spec: &RunSpec, authority: &str) -> Option<crate::drive::app::AppPlan> {
    use crate::drive::app::App;
    let app = match (&spec.video, &spec.page) {
        (Some(v), _) => App::Video(v.clone()),
        (None, Some(p)) => App::Page(Arc::new(p.clone())),
        (None, None) => return None,
    };
    Some(crate::drive::app::AppPlan {
        app,
        base: format!("https://{authority}"),
        verify: spec.verify,
        h1: spec.proto == Protocol::H1,
    })
}
