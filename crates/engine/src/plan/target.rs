//! Whom a run fetches from, as `--target`, `--url` and `--connect-to` give it: an origin
//! parsed strictly (a port `http` would drop reads as an error, not as 443), or the
//! in-process server.

use http::Uri;
use qbench_core::spec::{Origin, Target};

use crate::error::{bad, ConfigError};

/// Whom to fetch from, as given (`--target`, `--url`...), before validation.
#[derive(Debug, Clone, Default)]
pub struct TargetArgs {
    pub target: Option<String>,
    pub urls: Vec<String>,
    pub repeat: u32,
    pub connect_to: Option<std::net::SocketAddr>,
    pub ca: Option<std::path::PathBuf>,
    pub insecure: bool,
    pub telemetry_token: Option<String>,
}

pub(crate) fn parse_origin(flag: &'static str, text: &str) -> Result<(Origin, Uri), ConfigError> {
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
    // `http` reads a port it cannot parse as u16 (99999) as no port, which would mean 443.
    let raw = auth.as_str();
    let host_port = raw.rsplit('@').next().unwrap_or(raw);
    let after_host = host_port
        .rfind(']')
        .map_or(host_port, |i| &host_port[i + 1..]);
    let port = match after_host.rsplit_once(':') {
        None => 443,
        Some((_, p)) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
            bad(
                flag,
                format!("`{text}`: `{p}` is not a port number (1 to 65535)"),
            )
        })?,
    };
    Ok((
        Origin {
            host: host.to_string(),
            port,
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

pub(crate) fn target_of(t: &TargetArgs) -> Result<Target, ConfigError> {
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
