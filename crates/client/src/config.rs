//! One validated configuration, built once from the flags and never re-validated.

use std::path::PathBuf;
use std::time::Duration;

use http::Uri;
use qbench_core::Workload;
use serde::Serialize;

use qbench_core::link::LinkSpec;
use qbench_server::ServerOptions;
use qbench_shaper::TopologyOptions;

use crate::cli::RunArgs;
use qbench_core::Protocol;

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

/// Host and port of an HTTPS origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// `host:port` with IPv6 literals bracketed, as in a URI authority.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// The matched server, started in this process on loopback.
    InProcess,
    /// A remote qbench-server: objects are `/bytes/{n}`.
    Server { origin: Origin },
    /// Arbitrary resources on any HTTPS server.
    Urls {
        origin: Origin,
        urls: Vec<String>,
        repeat: u32,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub proto: Protocol,
    pub target: Target,
    /// `None` with `--url`.
    pub objects: Option<Workload>,
    pub total_objects: u64,
    /// Concurrent requests per connection; `None` = all at once.
    pub streams: Option<u32>,
    pub connections: u32,
    pub runs: u32,
    pub reuse: bool,
    pub resume: bool,
    pub zero_rtt: bool,
    pub insecure: bool,
    pub verify: bool,
    pub ca: Option<PathBuf>,
    pub connect_to: Option<std::net::SocketAddr>,
    #[serde(rename = "timeout_ms", serialize_with = "ser_ms")]
    pub timeout: Duration,
    pub json: Option<String>,
    /// Sender congestion control of the in-process server; `None` for remote servers.
    pub cc: Option<&'static str>,
    pub cwnd_cap: Option<u32>,
    pub initial_cwnd: Option<u32>,
    pub rwnd: Option<u64>,
    #[serde(rename = "sample_interval_us", serialize_with = "ser_us")]
    pub sample_interval: Duration,
    pub telemetry: bool,
    pub state_graph: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    #[serde(skip)]
    pub server: Option<ServerOptions>,
    pub link: Option<LinkSpec>,
    #[serde(skip)]
    pub link_options: Option<TopologyOptions>,
    pub dry_run: bool,
    pub client_threads: u32,
    pub server_threads: u32,
}

fn ser_us<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
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

impl Config {
    pub fn from_args(a: RunArgs) -> Result<Self, ConfigError> {
        if a.timeout.is_zero() {
            return Err(bad("--timeout", "must be greater than zero"));
        }
        if a.proto == Protocol::H1 && a.streams.is_some_and(|s| s > 1) {
            return Err(bad(
                "--streams",
                "HTTP/1.1 carries one request at a time per connection; use --connections",
            ));
        }
        if a.zero_rtt && a.proto != Protocol::H3 {
            return Err(bad("--0rtt", "0-RTT is measured for h3 only"));
        }
        if a.reuse && (a.resume || a.zero_rtt) {
            return Err(bad(
                "--reuse",
                "reused connections make no new handshakes, so --resume/--0rtt would do nothing",
            ));
        }
        if a.connect_to.is_some() && a.target.is_none() && a.urls.is_empty() {
            return Err(bad("--connect-to", "needs --target or --url"));
        }
        let (target, objects, total) = if !a.urls.is_empty() {
            let mut origin = None;
            for u in &a.urls {
                let (o, uri) = parse_origin("--url", u)?;
                if uri.path_and_query().is_none() {
                    return Err(bad("--url", format!("`{u}` has no path")));
                }
                match &origin {
                    None => origin = Some(o),
                    Some(first) if *first != o => {
                        return Err(bad(
                            "--url",
                            format!("all URLs must share one host and port; `{u}` differs"),
                        ))
                    }
                    Some(_) => {}
                }
            }
            let total = a.urls.len() as u64 * u64::from(a.repeat);
            let target = Target::Urls {
                origin: origin.expect("at least one URL"),
                urls: a.urls.clone(),
                repeat: a.repeat,
            };
            (target, None, total)
        } else {
            let w = a
                .objects
                .unwrap_or_else(|| "200x5KB".parse().expect("default workload parses"));
            let target = match &a.target {
                Some(t) => {
                    let (origin, uri) = parse_origin("--target", t)?;
                    if !matches!(uri.path(), "" | "/") {
                        return Err(bad(
                            "--target",
                            "takes a server's origin only (https://HOST:PORT); use --url for paths",
                        ));
                    }
                    Target::Server { origin }
                }
                None => Target::InProcess,
            };
            let total = w.total_objects();
            (target, Some(w), total)
        };
        let in_process = matches!(target, Target::InProcess);
        let is_urls = matches!(target, Target::Urls { .. });
        for (flag, given) in [
            ("--cc", a.cc.is_some()),
            ("--cwnd-cap", a.cwnd_cap.is_some()),
            ("--initial-cwnd", a.initial_cwnd.is_some()),
        ] {
            if given && !in_process {
                return Err(bad(
                    flag,
                    "applies to the in-process server; pass it to qbench-server",
                ));
            }
        }
        if a.link.is_some() && !in_process {
            return Err(bad("--link", "runs the in-process server behind the link; it cannot be used with --target or --url"));
        }
        // Across a link, a TCP window cap is a route metric on the server's namespace.
        let tcp_cap = (a.proto != Protocol::H3 && a.link.is_some())
            .then_some(a.cwnd_cap)
            .flatten();
        if a.proto != Protocol::H3 && a.link.is_none() {
            for (flag, given) in [
                ("--cwnd-cap", a.cwnd_cap.is_some()),
                ("--initial-cwnd", a.initial_cwnd.is_some()),
            ] {
                if given {
                    return Err(bad(
                        flag,
                        "a TCP sender is capped through route metrics, which the kernel does not keep on loopback: use --link, or h3",
                    ));
                }
            }
        }
        if a.rwnd
            .is_some_and(|r| r.0 < 1024 || r.0 > u64::from(u32::MAX))
        {
            return Err(bad("--rwnd", "must be between 1KiB and 4GiB"));
        }
        if (a.state_graph.is_some() || a.plot.is_some())
            && (a.no_telemetry || a.sample_interval.is_zero() || is_urls)
        {
            let flag = if a.state_graph.is_some() {
                "--state-graph"
            } else {
                "--plot"
            };
            return Err(bad(flag, "needs telemetry from a qbench server (not with --url, --no-telemetry or --sample-interval 0)"));
        }
        let server = in_process.then(|| {
            let mut o = ServerOptions::loopback();
            o.protocols = vec![a.proto];
            if let Some(cc) = a.cc {
                o.cc = cc;
            }
            if a.proto == Protocol::H3 {
                o.cwnd_cap = a.cwnd_cap;
                o.initial_cwnd = a.initial_cwnd;
            }
            if a.link.is_some() {
                let addr = qbench_shaper::plan::SERVER_ADDR;
                o.listen = format!("{addr}:0").parse().expect("valid literal address");
                o.cert_names.push(addr.to_string());
            }
            o.sample_interval = a.sample_interval;
            o
        });
        if u64::from(a.connections) > total {
            return Err(bad(
                "--connections",
                format!(
                    "{} connections for {total} objects would leave some idle",
                    a.connections
                ),
            ));
        }
        Ok(Config {
            proto: a.proto,
            target,
            objects,
            total_objects: total,
            streams: match a.proto {
                Protocol::H1 => Some(1),
                _ => a.streams,
            },
            connections: a.connections,
            runs: a.runs,
            reuse: a.reuse,
            resume: a.resume || a.zero_rtt,
            zero_rtt: a.zero_rtt,
            insecure: a.insecure,
            verify: a.verify,
            ca: a.ca,
            connect_to: a.connect_to,
            timeout: a.timeout,
            json: a.json,
            cc: server.as_ref().map(|o| o.cc.as_str()),
            cwnd_cap: a.cwnd_cap,
            initial_cwnd: a.initial_cwnd,
            rwnd: a.rwnd.map(|r| r.0),
            sample_interval: a.sample_interval,
            telemetry: !(a.no_telemetry || is_urls || in_process && a.sample_interval.is_zero()),
            state_graph: a.state_graph,
            plot: a.plot,
            server,
            link_options: a.link.as_ref().map(|_| TopologyOptions {
                backend: a.backend,
                offloads: a.offloads,
                tcp_cwnd_cap: tcp_cap,
                tcp_initial_cwnd: (a.proto != Protocol::H3)
                    .then_some(a.initial_cwnd)
                    .flatten(),
                id: None,
            }),
            link: a.link,
            dry_run: a.dry_run,
            client_threads: a.client_threads,
            server_threads: a.server_threads,
        })
    }

    /// Request URIs in order, given the origin actually connected to.
    pub fn requests(&self, origin: &Origin) -> Vec<(Uri, Option<u64>)> {
        let base = format!("https://{}", origin.authority());
        match (&self.target, &self.objects) {
            (Target::Urls { urls, repeat, .. }, _) => (0..*repeat)
                .flat_map(|_| urls.iter())
                .map(|u| (u.parse().expect("validated URL"), None))
                .collect(),
            (_, Some(w)) => w
                .sizes()
                .map(|n| {
                    let uri = format!("{base}/bytes/{n}").parse().expect("valid URI");
                    (uri, Some(n))
                })
                .collect(),
            (_, None) => Vec::new(),
        }
    }
}
