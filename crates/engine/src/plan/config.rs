//! One validated configuration per side, built once from a typed `RunSpec` (whether it came
//! from flags or from a scenario cell) and never re-validated. Split by concern: what is
//! measured (`RunConfig`, which the report records), whom it is fetched from (the target in
//! it), the in-process server's settings and the emulated link's.

use std::sync::Arc;

use qbench_core::report::config::RunConfig;
use qbench_core::spec::{RunSpec, Target};
use qbench_core::wire::MAX_STREAMS;
use qbench_core::{CcAlgo, Protocol};
use qbench_server::ServerOptions;
use qbench_shaper::{BackendChoice, Offloads, TopologyOptions};
use qbench_stack::keylog::KeyLogTo;
use qbench_stack::qlog::QlogDir;

use crate::error::bad;
use crate::error::ConfigError;

pub use super::target::TargetArgs;

/// How to build the emulated link, when there is one.
#[derive(Debug, Clone, Copy)]
pub struct LinkChoice {
    pub backend: BackendChoice,
    pub offloads: Offloads,
    /// Measure the link before the first run (on by default).
    pub calibrate: bool,
    /// Refuse a link that misses its spec.
    pub strict: bool,
}

impl Default for LinkChoice {
    fn default() -> Self {
        Self {
            backend: BackendChoice::Auto,
            offloads: Offloads::Default,
            calibrate: true,
            strict: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// What is measured and from whom; recorded in the report as it is.
    pub run: RunConfig,
    /// The in-process server's settings; `None` for remote targets.
    pub server: Option<ServerOptions>,
    /// How the link is built, with `run.spec.link`.
    pub link_options: Option<TopologyOptions>,
    /// What the server's `--telemetry token` asks for; kept out of `run`, hence of reports.
    pub telemetry_token: Option<String>,
    /// `--qlog`: where the client's sampled QUIC connections write qlog files.
    pub qlog: Option<Arc<QlogDir>>,
    /// `--keylog` (or `SSLKEYLOGFILE`): where every client connection logs its secrets.
    pub key_log: Option<Arc<KeyLogTo>>,
}

/// `--duration`, `--rate` and `--interval` against each other and the rest.
fn check_load(s: &RunSpec) -> Result<(), ConfigError> {
    if let Some(l) = &s.load {
        l.check().map_err(|(flag, m)| bad(flag, m))?;
        if l.rate.is_some() && s.streams.is_some() {
            return Err(bad(
                "--streams",
                "sets a closed loop's concurrency; with --rate, requests start on schedule (bound them with --max-inflight)",
            ));
        }
    }
    if let Some(i) = s.interval {
        if i < std::time::Duration::from_millis(10) {
            return Err(bad("--interval", "must be at least 10ms"));
        }
        if let Some(d) = s.load.as_ref().map(|l| l.duration).filter(|d| i > *d) {
            return Err(bad(
                "--interval",
                format!("{i:?} is longer than the --duration of {d:?}"),
            ));
        }
    }
    Ok(())
}

/// Every shard gets at least one connection (and, in an open loop, one request in flight).
fn check_shard(spec: &RunSpec, s: qbench_core::spec::shard::Shard) -> Result<(), ConfigError> {
    let n = s.count;
    if spec.connections < n {
        return Err(bad(
            "--shard",
            format!(
                "{n} shards need at least {n} --connections (one each), not {}",
                spec.connections
            ),
        ));
    }
    if let Some(m) = spec
        .load
        .as_ref()
        .filter(|l| l.rate.is_some())
        .map(|l| l.max_inflight)
        .filter(|&m| m < n)
    {
        return Err(bad(
            "--shard",
            format!("{n} shards need a --max-inflight of at least {n}, not {m}"),
        ));
    }
    Ok(())
}

/// Checks that hold whatever the target.
fn check_spec(s: &RunSpec) -> Result<(), ConfigError> {
    if s.timeout.is_zero() {
        return Err(bad("--timeout", "must be greater than zero"));
    }
    check_load(s)?;
    super::apps::check(s)?;
    super::client_cpu::check(s)?;
    super::third_party::check(s)?;
    if s.proto == Protocol::H1 && s.streams.is_some_and(|n| n > 1) {
        return Err(bad(
            "--streams",
            "HTTP/1.1 carries one request at a time per connection; use --connections",
        ));
    }
    if s.zero_rtt && !s.proto.is_quic() {
        return Err(bad("--0rtt", "0-RTT is measured for h3 only"));
    }
    if s.reuse && (s.resume || s.zero_rtt) {
        return Err(bad(
            "--reuse",
            "reused connections make no new handshakes, so --resume/--0rtt would do nothing",
        ));
    }
    if s.rwnd
        .is_some_and(|r| r.0 < 1024 || r.0 > u64::from(u32::MAX))
    {
        return Err(bad("--rwnd", "must be between 1KiB and 4GiB"));
    }
    if s.proto != Protocol::H3 && !s.quic.is_empty() {
        return Err(bad("--quic", "sets QUIC's stack: h3 only"));
    }
    if s.proto != Protocol::H3 && s.reorder_time_threshold.is_some() {
        return Err(bad(
            "--reorder-time-threshold",
            "QUIC's alone (TCP has no such setting; --reorder-threshold sets its tcp_reordering)",
        ));
    }
    if s.proto != Protocol::H3 && s.link.is_none() && s.reorder_threshold.is_some() {
        return Err(bad(
            "--reorder-threshold",
            "TCP's is net.ipv4.tcp_reordering, set in the server's own namespace and never on this host: use --link, or h3",
        ));
    }
    check_chain(s)?;
    if s.proto != Protocol::H3 && s.link.is_none() {
        for (flag, given) in [
            ("--cwnd-cap", s.cwnd_cap.is_some()),
            ("--initial-cwnd", s.initial_cwnd.is_some()),
        ] {
            if given {
                return Err(bad(
                    flag,
                    "a TCP sender is capped through route metrics, which the kernel does not keep on loopback: use --link, or h3",
                ));
            }
        }
    }
    Ok(())
}

/// `--link-b` and `--proxy`: a middle host needs both segments, and a relay is HTTP/2 or /3.
fn check_chain(s: &RunSpec) -> Result<(), ConfigError> {
    if s.proxy.is_some() && s.link_b.is_none() {
        return Err(bad(
            "--proxy",
            "runs on the middle host of a two-segment path: --link-a SPEC --link-b SPEC",
        ));
    }
    if s.proxy == Some(Protocol::H1) {
        return Err(bad("--proxy", "h2 or h3"));
    }
    if s.link_b.is_some() && s.link.is_none() {
        return Err(bad("--link-b", "needs --link-a (the client's segment)"));
    }
    if s.link_b.is_some() && !s.proto.is_quic() {
        for (flag, given) in [
            ("--cwnd-cap", s.cwnd_cap.is_some()),
            ("--initial-cwnd", s.initial_cwnd.is_some()),
            ("--reorder-threshold", s.reorder_threshold.is_some()),
        ] {
            if given {
                return Err(bad(
                    flag,
                    "TCP's is a route or sysctl of one server namespace; across --link-b the sender may be the proxy or the server: h3 only",
                ));
            }
        }
    }
    Ok(())
}

/// The matched server in this process, as the spec sets it up.
fn server_options(s: &RunSpec) -> ServerOptions {
    let mut o = ServerOptions::loopback();
    // The client logs the same secrets (SSLKEYLOGFILE would reach this server's parser too).
    o.keylog = None;
    o.protocols = vec![s.proto];
    // Behind a proxy, the server also speaks the proxy's upstream protocol.
    if let Some(via) = s.proxy.filter(|&p| p != s.proto) {
        o.protocols.push(via);
    }
    o.cc = s.cc.unwrap_or(CcAlgo::Cubic);
    if s.proto.is_quic() {
        o.cwnd_cap = s.cwnd_cap;
        o.initial_cwnd = s.initial_cwnd;
        o.reorder_threshold = s.reorder_threshold;
        o.reorder_time_threshold = s.reorder_time_threshold;
        o.quic = s.quic;
    }
    if s.link.is_some() {
        let addr = match s.link_b {
            Some(_) => qbench_shaper::plan::chain_server_addr(),
            None => qbench_shaper::plan::SERVER_ADDR.to_string(),
        };
        o.listen = format!("{addr}:0").parse().expect("valid literal address");
        o.cert_names.push(addr);
    }
    o.sample_interval = s.sample_interval;
    // Room for one run's connections while the previous run's are still closing.
    o.max_connections = o.max_connections.max(s.connections.saturating_mul(2));
    // A client that allows more time without progress is not cut short by its own server.
    o.handshake_timeout = o.handshake_timeout.max(s.timeout);
    o.header_timeout = o.header_timeout.max(s.timeout);
    o.idle_timeout = o.idle_timeout.max(s.timeout);
    o
}

/// Configurations run through one link share its route toward the client, and with it any
/// TCP window metric: those that set one must agree, and then every one carries it.
pub(crate) fn share_route(cfgs: &mut [Config]) -> Result<(), ConfigError> {
    let route = |c: &Config| {
        c.link_options
            .as_ref()
            .map(|o| (o.tcp_cwnd_cap, o.tcp_initial_cwnd))
            .filter(|m| *m != (None, None))
    };
    let mut shared = None;
    for c in cfgs.iter() {
        match (shared, route(c)) {
            (Some(x), Some(y)) if x != y => {
                return Err(bad(
                    "--a.cwnd-cap/--b.cwnd-cap",
                    "TCP windows are capped on the one route both sides share; compare TCP caps in separate runs",
                ))
            }
            (None, r) => shared = r,
            _ => {}
        }
    }
    if let Some((cap, initial)) = shared {
        for o in cfgs.iter_mut().filter_map(|c| c.link_options.as_mut()) {
            o.tcp_cwnd_cap = cap;
            o.tcp_initial_cwnd = initial;
        }
    }
    Ok(())
}

impl Config {
    pub fn new(mut spec: RunSpec, t: &TargetArgs, link: LinkChoice) -> Result<Self, ConfigError> {
        check_spec(&spec)?;
        if t.repeat > 1 && spec.load.is_some() {
            return Err(bad(
                "--repeat",
                "counts the fetches of one pass; with --duration the URLs are fetched in turn until it ends",
            ));
        }
        let target = super::target::target_of(t)?;
        check_token(t.telemetry_token.as_deref())?;
        super::server_program::check(&spec, &target)?;
        // A server program serves in qbench-server's place.
        let in_process = target == Target::InProcess && spec.server.is_none();
        if target != Target::InProcess {
            check_remote(&spec)?;
        }
        settle(&mut spec, &target);
        let total_objects = total_objects(&spec, &target);
        if spec.load.is_none() && u64::from(spec.connections) > total_objects {
            return Err(bad(
                "--connections",
                format!(
                    "{} connections for {total_objects} objects would leave some idle",
                    spec.connections
                ),
            ));
        }
        if let Some(s) = spec.shard {
            check_shard(&spec, s)?;
        }
        Ok(Self {
            server: in_process.then(|| server_options(&spec)),
            link_options: link_options(&spec, link),
            telemetry_token: t.telemetry_token.clone(),
            qlog: None,
            key_log: None,
            run: RunConfig {
                spec,
                target,
                total_objects,
                insecure: t.insecure,
                ca: t.ca.clone(),
                connect_to: t.connect_to,
                sender: None,
            },
        })
    }

    pub fn spec(&self) -> &RunSpec {
        &self.run.spec
    }

    /// `--qlog DIR [--qlog-sample P]`: the client's QUIC connections and the in-process
    /// server's write qlog files in `dir`, the share `sample` of them.
    pub fn qlog_to(&mut self, dir: &std::path::Path, sample: f64) {
        self.qlog = Some(Arc::new(QlogDir::new(dir, sample, "client")));
        if let Some(o) = self.server.as_mut() {
            o.qlog = Some(dir.to_path_buf());
            o.qlog_sample = sample;
        }
    }
}

/// `--telemetry-token` goes into the telemetry URL's query as it is.
fn check_token(token: Option<&str>) -> Result<(), ConfigError> {
    let Some(tok) = token else {
        return Ok(());
    };
    let ok = |c: u8| c.is_ascii_alphanumeric() || b"._~-".contains(&c);
    if tok.is_empty() || !tok.bytes().all(ok) {
        return Err(bad(
            "--telemetry-token",
            "a token is letters, digits and . _ ~ - (as qbench-server prints it)",
        ));
    }
    Ok(())
}

/// A remote target's server is set up by its own flags: the in-process server's and its
/// link's are refused.
fn check_remote(spec: &RunSpec) -> Result<(), ConfigError> {
    for (flag, given) in [
        ("--cc", spec.cc.is_some()),
        ("--server-cpu", spec.server_cpu.is_some()),
        ("--cwnd-cap", spec.cwnd_cap.is_some()),
        ("--initial-cwnd", spec.initial_cwnd.is_some()),
        ("--reorder-threshold", spec.reorder_threshold.is_some()),
        (
            "--reorder-time-threshold",
            spec.reorder_time_threshold.is_some(),
        ),
    ] {
        if given {
            return Err(bad(
                flag,
                "applies to the in-process server; pass it to qbench-server",
            ));
        }
    }
    if spec.link.is_some() {
        return Err(bad(
            "--link",
            "runs the in-process server behind the link; it cannot be used with --target or --url",
        ));
    }
    if spec.proxy.is_some() {
        return Err(bad("--proxy", "runs beside the in-process server's link; for a remote server, run `qbench proxy` there"));
    }
    Ok(())
}

/// Fills in what the target and the protocol imply, so that the report records what runs.
fn settle(spec: &mut RunSpec, target: &Target) {
    if matches!(target, Target::Urls { .. }) {
        spec.objects = None;
        spec.telemetry = false;
    }
    if spec.server.is_some() {
        // A server program has no telemetry route, and its congestion control is its own.
        spec.telemetry = false;
    } else if *target == Target::InProcess {
        spec.cc = Some(spec.cc.unwrap_or(CcAlgo::Cubic));
        spec.telemetry &= !spec.sample_interval.is_zero();
    }
    // As many requests in flight per connection as the matched server allows (h2's
    // SETTINGS_MAX_CONCURRENT_STREAMS, h3's MAX_STREAMS): more would wait inside the
    // transport for a stream, and be timed while they wait.
    // An open loop starts requests on schedule, not per stream.
    let open_loop = spec.load.as_ref().is_some_and(|l| l.rate.is_some());
    spec.streams = (!open_loop).then(|| match spec.proto {
        Protocol::H1 => 1,
        _ => spec.streams.unwrap_or(MAX_STREAMS),
    });
    spec.resume |= spec.zero_rtt;
}

/// Objects per run: the URLs' fetches, the workload's objects, the video's segments or the
/// page's objects.
fn total_objects(spec: &RunSpec, target: &Target) -> u64 {
    match (target, &spec.objects) {
        (Target::Urls { urls, repeat, .. }, _) => urls.len() as u64 * u64::from(*repeat),
        (_, Some(w)) => w.total_objects(),
        (_, None) => match (&spec.video, &spec.page) {
            (Some(v), _) => v.segments(),
            (_, Some(p)) => p.profile.objects.len() as u64,
            _ => 0,
        },
    }
}

/// How the spec's link is built, if it has one.
fn link_options(spec: &RunSpec, link: LinkChoice) -> Option<TopologyOptions> {
    // Across a link, a TCP window cap is a route metric on the server's namespace.
    let tcp = !spec.proto.is_quic();
    spec.link.as_ref().map(|_| TopologyOptions {
        backend: link.backend,
        offloads: link.offloads,
        tcp_cwnd_cap: spec.cwnd_cap.filter(|_| tcp),
        tcp_initial_cwnd: spec.initial_cwnd.filter(|_| tcp),
        tcp_reordering: spec.reorder_threshold.filter(|_| tcp),
        id: None,
        calibrate: link.calibrate,
        strict: link.strict,
        stop: qbench_shaper::stop::Stop::default(),
    })
}

/// `--state-graph` and `--plot` draw the sender's telemetry, so there must be some.
pub fn check_telemetry(flag: &'static str, cfg: &Config) -> Result<(), ConfigError> {
    if cfg.spec().telemetry {
        return Ok(());
    }
    Err(ConfigError {
        flag,
        message: "needs telemetry from a qbench server (not with --url, --no-telemetry or --sample-interval 0)".into(),
    })
}

#[cfg(test)]
mod tests {
    use qbench_core::spec::RunSpec;
    use qbench_core::Protocol;

    use super::{share_route, Config, LinkChoice, TargetArgs};
    use crate::plan::target::parse_origin;

    #[test]
    fn origins_and_their_ports() {
        let port = |t: &str| parse_origin("--target", t).map(|(o, _)| (o.host, o.port));
        let ok = |t: &str| port(t).ok();
        assert_eq!(ok("https://[::1]:4433"), Some(("::1".into(), 4433)));
        assert_eq!(ok("https://[::1]"), Some(("::1".into(), 443)));
        assert_eq!(ok("https://localhost"), Some(("localhost".into(), 443)));
        assert_eq!(ok("https://u@h:8443"), Some(("h".into(), 8443)));
        for bad in [
            "https://h:99999",
            "https://h:0",
            "https://h:",
            "https://[::1]:70000",
        ] {
            let e = port(bad).unwrap_err();
            assert_eq!(e.flag, "--target", "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_target_is_an_origin_or_an_error(s in "https://\\PC{0,30}") {
            let _ = parse_origin("--target", &s);
        }
    }

    fn side(proto: Protocol, cwnd_cap: Option<u32>) -> Config {
        let spec = RunSpec {
            proto,
            cwnd_cap,
            link: Some("rate=10mbit".parse().unwrap()),
            ..RunSpec::default()
        };
        Config::new(spec, &TargetArgs::default(), LinkChoice::default()).unwrap()
    }

    fn caps(cfgs: &[Config]) -> Vec<Option<u32>> {
        cfgs.iter()
            .map(|c| c.link_options.as_ref().unwrap().tcp_cwnd_cap)
            .collect()
    }

    #[test]
    fn one_route_carries_the_tcp_cap_for_every_side() {
        // The QUIC side's cap is its controller's; the TCP side's is the shared route's.
        let mut sides = [side(Protocol::H3, Some(430)), side(Protocol::H2, Some(10))];
        assert_eq!(caps(&sides), [None, Some(10)]);
        share_route(&mut sides).unwrap();
        assert_eq!(caps(&sides), [Some(10), Some(10)]);
        assert_eq!(sides[0].server.as_ref().unwrap().cwnd_cap, Some(430));

        let mut same = [side(Protocol::H1, Some(10)), side(Protocol::H2, Some(10))];
        share_route(&mut same).unwrap();
        let mut none = [side(Protocol::H1, None), side(Protocol::H3, None)];
        share_route(&mut none).unwrap();
        assert_eq!(caps(&none), [None, None]);

        let mut differ = [side(Protocol::H1, Some(10)), side(Protocol::H2, Some(20))];
        let err = share_route(&mut differ).unwrap_err().to_string();
        assert!(err.starts_with("--a.cwnd-cap/--b.cwnd-cap: "), "{err}");
    }

    #[test]
    fn default_concurrency_is_the_matched_servers_stream_limit() {
        for (proto, want) in [(Protocol::H3, 256), (Protocol::H2, 256), (Protocol::H1, 1)] {
            let c = side(proto, None);
            assert_eq!(c.spec().streams, Some(want), "{proto}");
            let server = c.server.as_ref().unwrap();
            assert!(
                want <= server.max_streams,
                "{proto}: the client asks for what is allowed"
            );
        }
    }
}
