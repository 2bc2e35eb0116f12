//! One validated configuration per side, built once from a typed `RunSpec` (whether it came
//! from flags or from a scenario cell) and never re-validated. Split by concern: what is
//! measured (`RunConfig`, which the report records), whom it is fetched from (the target in
//! it), the in-process server's settings and the emulated link's.

use http::Uri;
use qbench_core::spec::{Origin, RunConfig, RunSpec, Target};
use qbench_core::wire::bytes_path;
use qbench_core::{CcAlgo, Protocol};
use qbench_server::ServerOptions;
use qbench_shaper::{BackendChoice, Offloads, TopologyOptions};

#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct ConfigError {
    pub flag: &'static str,
    pub message: String,
}

fn bad(flag: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        flag,
        message: message.into(),
    }
}

/// Whom to fetch from, as given (`--target`, `--url`...), before validation.
#[derive(Debug, Clone, Default)]
pub struct TargetArgs {
    pub target: Option<String>,
    pub urls: Vec<String>,
    pub repeat: u32,
    pub connect_to: Option<std::net::SocketAddr>,
    pub ca: Option<std::path::PathBuf>,
    pub insecure: bool,
}

/// How to build the emulated link, when there is one.
#[derive(Debug, Clone, Copy)]
pub struct LinkChoice {
    pub backend: BackendChoice,
    pub offloads: Offloads,
}

impl Default for LinkChoice {
    fn default() -> Self {
        Self {
            backend: BackendChoice::Auto,
            offloads: Offloads::Default,
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
}

fn parse_origin(flag: &'static str, text: &str) -> Result<(Origin, Uri), ConfigError> {
    let uri: Uri = text
        .parse()
        .map_err(|e| bad(flag, format!("`{text}` is not a URL: {e}")))?;
    if uri.scheme_str() != Some("https") {
        return Err(bad(flag, format!("`{text}` must start with https://")));
    }
    let auth = uri
        .authority()
        .ok_or_else(|| bad(flag, format!("`{text}` has no host")))?;
    let host = auth.host().trim_start_matches('[').trim_end_matches(']');
    Ok((
        Origin {
            host: host.to_string(),
            port: auth.port_u16().unwrap_or(443),
        },
        uri,
    ))
}

fn url_target(urls: &[String], repeat: u32) -> Result<Target, ConfigError> {
    let mut origin: Option<Origin> = None;
    for u in urls {
        let (o, uri) = parse_origin("--url", u)?;
        if uri.path_and_query().is_none() {
            return Err(bad("--url", format!("`{u}` has no path")));
        }
        match &origin {
            Some(first) if *first != o => {
                return Err(bad(
                    "--url",
                    format!("all URLs must share one host and port; `{u}` differs"),
                ))
            }
            Some(_) => {}
            None => origin = Some(o),
        }
    }
    let origin = origin.ok_or_else(|| bad("--url", "no URL given"))?;
    Ok(Target::Urls {
        origin,
        urls: urls.to_vec(),
        repeat,
    })
}

fn target_of(t: &TargetArgs) -> Result<Target, ConfigError> {
    if !t.urls.is_empty() {
        return url_target(&t.urls, t.repeat);
    }
    match &t.target {
        Some(text) => {
            let (origin, uri) = parse_origin("--target", text)?;
            if !matches!(uri.path(), "" | "/") {
                return Err(bad(
                    "--target",
                    "takes a server's origin only (https://HOST:PORT); use --url for paths",
                ));
            }
            Ok(Target::Server { origin })
        }
        None => {
            if t.connect_to.is_some() {
                return Err(bad("--connect-to", "needs --target or --url"));
            }
            Ok(Target::InProcess)
        }
    }
}

/// Checks that hold whatever the target.
fn check_spec(s: &RunSpec) -> Result<(), ConfigError> {
    if s.timeout.is_zero() {
        return Err(bad("--timeout", "must be greater than zero"));
    }
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

/// The matched server in this process, as the spec sets it up.
fn server_options(s: &RunSpec) -> ServerOptions {
    let mut o = ServerOptions::loopback();
    o.protocols = vec![s.proto];
    o.cc = s.cc.unwrap_or(CcAlgo::Cubic);
    if s.proto.is_quic() {
        o.cwnd_cap = s.cwnd_cap;
        o.initial_cwnd = s.initial_cwnd;
    }
    if s.link.is_some() {
        let addr = qbench_shaper::plan::SERVER_ADDR;
        o.listen = format!("{addr}:0").parse().expect("valid literal address");
        o.cert_names.push(addr.to_string());
    }
    o.sample_interval = s.sample_interval;
    o
}

impl Config {
    pub fn new(mut spec: RunSpec, t: &TargetArgs, link: LinkChoice) -> Result<Self, ConfigError> {
        check_spec(&spec)?;
        let target = target_of(t)?;
        let in_process = target == Target::InProcess;
        if !in_process {
            for (flag, given) in [
                ("--cc", spec.cc.is_some()),
                ("--cwnd-cap", spec.cwnd_cap.is_some()),
                ("--initial-cwnd", spec.initial_cwnd.is_some()),
            ] {
                if given {
                    return Err(bad(
                        flag,
                        "applies to the in-process server; pass it to qbench-server",
                    ));
                }
            }
            if spec.link.is_some() {
                return Err(bad("--link", "runs the in-process server behind the link; it cannot be used with --target or --url"));
            }
        }
        if matches!(target, Target::Urls { .. }) {
            spec.objects = None;
            spec.telemetry = false;
        }
        if in_process {
            spec.cc = Some(spec.cc.unwrap_or(CcAlgo::Cubic));
            spec.telemetry &= !spec.sample_interval.is_zero();
        }
        if spec.proto == Protocol::H1 {
            spec.streams = Some(1);
        }
        spec.resume |= spec.zero_rtt;
        let total_objects = match (&target, &spec.objects) {
            (Target::Urls { urls, repeat, .. }, _) => urls.len() as u64 * u64::from(*repeat),
            (_, Some(w)) => w.total_objects(),
            (_, None) => 0,
        };
        if u64::from(spec.connections) > total_objects {
            return Err(bad(
                "--connections",
                format!(
                    "{} connections for {total_objects} objects would leave some idle",
                    spec.connections
                ),
            ));
        }
        // Across a link, a TCP window cap is a route metric on the server's namespace.
        let tcp = !spec.proto.is_quic();
        let link_options = spec.link.as_ref().map(|_| TopologyOptions {
            backend: link.backend,
            offloads: link.offloads,
            tcp_cwnd_cap: spec.cwnd_cap.filter(|_| tcp),
            tcp_initial_cwnd: spec.initial_cwnd.filter(|_| tcp),
            id: None,
        });
        Ok(Self {
            server: in_process.then(|| server_options(&spec)),
            link_options,
            run: RunConfig {
                spec,
                target,
                total_objects,
                insecure: t.insecure,
                ca: t.ca.clone(),
                connect_to: t.connect_to,
            },
        })
    }

    pub fn spec(&self) -> &RunSpec {
        &self.run.spec
    }

    /// Request URIs in order, given the origin actually connected to.
    pub fn requests(&self, origin: &Origin) -> Vec<(Uri, Option<u64>)> {
        let base = format!("https://{}", origin.authority());
        match (&self.run.target, &self.run.spec.objects) {
            (Target::Urls { urls, repeat, .. }, _) => (0..*repeat)
                .flat_map(|_| urls.iter())
                .filter_map(|u| u.parse().ok())
                .map(|uri| (uri, None))
                .collect(),
            (_, Some(w)) => w
                .sizes()
                .filter_map(|n| {
                    let uri = format!("{base}{}", bytes_path(n)).parse().ok()?;
                    Some((uri, Some(n)))
                })
                .collect(),
            (_, None) => Vec::new(),
        }
    }
}
