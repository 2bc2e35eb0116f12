//! `qbench proxy`: a split-connection HTTP proxy (IMC'17 Section 5.5). It terminates the
//! client's QUIC or TCP + TLS connection with the matched server's own listeners, TLS and
//! limits, and relays each request over its own upstream HTTP/3 or HTTP/2 connection.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use qbench_core::Protocol;
use qbench_server::relay::{RelayStats, Upstream};

use crate::flags::tools::ProxyArgs;
use qbench_engine::error::bad;
use qbench_engine::tls::{client_config, Trust};

/// The origin's host, port and name, as `--upstream` gives them.
pub fn parse_upstream(url: &str) -> Result<(String, u16), String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("`{url}`: {e} (https://HOST[:PORT])"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("`{url}`: an https:// URL"));
    }
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("`{url}`: no host"))?;
    if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
        return Err(format!(
            "`{url}`: the origin only (requests keep their own paths)"
        ));
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    // http::Uri drops a port it cannot read: look at the authority's text itself.
    let authority = uri.authority().map_or("", |a| a.as_str());
    let port_text = match authority.rsplit_once(':') {
        Some((_, p)) if !authority.ends_with(']') => Some(p),
        _ => None,
    };
    let port = match port_text {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("`{url}`: port {p} is not 1 to 65535"))?,
        None => 443,
    };
    Ok((host.to_string(), port))
}

/// What `args` relay to; needs a tokio runtime (the QUIC endpoint binds here).
pub async fn upstream(args: &ProxyArgs) -> anyhow::Result<Upstream> {
    if args.upstream_proto == Protocol::H1 {
        return Err(bad(
            "--upstream-proto",
            "h2 or h3 (an HTTP/1.1 upstream would serialize the client's streams)",
        )
        .into());
    }
    let (host, port) = parse_upstream(&args.upstream).map_err(|e| bad("--upstream", e))?;
    let trust = match (&args.upstream_ca, args.upstream_insecure) {
        (_, true) => Trust::Insecure,
        (Some(path), false) => Trust::Pem {
            origin: path.display().to_string(),
            pem: qbench_engine::files::read_text(
                path,
                qbench_core::spec::input::MAX_PEM_BYTES,
                "a PEM file",
            )
            .map_err(|e| bad("--upstream-ca", e))?,
        },
        (None, false) => Trust::System,
    };
    // The client's messages name `--ca`; here the file came with `--upstream-ca`.
    let tls = client_config(&trust, args.upstream_proto.alpn(), None, false).map_err(|e| {
        use qbench_engine::tls::ClientTlsError as E;
        let message = match e {
            E::Ca { path, message } => format!("{path}: {message}"),
            E::CaEmpty { path } => format!("{path}: no certificate found"),
            other => other.to_string(),
        };
        bad("--upstream-ca", message)
    })?;
    let addr: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .with_context(|| format!("--upstream: resolving {host}"))?
        .next()
        .with_context(|| format!("--upstream: {host} has no address"))?;
    // Relaying to itself, each request would come back as a new one until every connection
    // is taken; a longer loop of proxies is cut by the Via each relayed request carries.
    let listen = args.serve.server.listen;
    let local = |ip: std::net::IpAddr| ip.is_loopback() || ip.is_unspecified() || ip == listen.ip();
    if addr.port() == listen.port()
        && (addr.ip() == listen.ip() || listen.ip().is_unspecified() && local(addr.ip()))
    {
        return Err(bad(
            "--upstream",
            format!("{addr} is this proxy's own --listen address: it would relay to itself"),
        )
        .into());
    }
    let endpoint = match args.upstream_proto {
        Protocol::H3 => {
            let any: SocketAddr = match addr {
                SocketAddr::V4(_) => "0.0.0.0:0".parse()?,
                SocketAddr::V6(_) => "[::]:0".parse()?,
            };
            Some(quinn::Endpoint::client(any).context("binding the upstream QUIC endpoint")?)
        }
        _ => None,
    };
    Ok(Upstream {
        proto: args.upstream_proto,
        addr,
        server_name: host,
        tls: Arc::new(tls),
        endpoint,
        timeout: args.upstream_timeout,
        stats: Arc::new(RelayStats::default()),
    })
}

/// One line on what the proxy carried and the CPU it used, for when it stops.
pub fn summary(stats: &RelayStats) -> String {
    let g = RelayStats::get;
    let cpu = qbench_engine::cpu::process_cpu();
    format!(
        "qbench proxy: relayed {} requests over {} upstream connections ({} failed to open, \
         {} opened again after the last closed); {} bytes up (request heads), {} bytes down \
         (bodies); {} answered 502/504/508 by the proxy; {} responses broken upstream or of \
         the wrong length; CPU {:.3} s user, {:.3} s system",
        g(&stats.requests),
        g(&stats.connects),
        g(&stats.connect_failures),
        g(&stats.reopened),
        g(&stats.bytes_up),
        g(&stats.bytes_down),
        g(&stats.failed),
        g(&stats.broken),
        cpu.user_s,
        cpu.sys_s
    )
}

/// `qbench proxy ARGS`: relays until SIGINT, SIGTERM or SIGHUP.
pub fn proxy(args: ProxyArgs) -> anyhow::Result<()> {
    super::serve::check_outputs(&args.serve, args.upstream_ca.as_deref())?;
    let rt = args.serve.threads.runtime().context("qbench proxy")?;
    rt.block_on(async {
        let up = upstream(&args).await?;
        let stats = up.stats.clone();
        let what = format!("relaying to {} over {}", args.upstream, args.upstream_proto);
        qbench_server::standalone::serve_until_signal(
            args.serve.server,
            &args.serve.cert_out,
            Some((up, what)),
        )
        .await
        .context("qbench proxy")?;
        crate::tell!("{}", summary(&stats));
        Ok(())
    })
}

/// `h2 upstream: 26 requests over 2 connections, 2.1 MB down, 0.4 kB up, CPU 0.05 s` over the
/// runs that went through a proxy; `None` when none did.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls() {
        assert_eq!(
            parse_upstream("https://a.example"),
            Ok(("a.example".into(), 443))
        );
        assert_eq!(
            parse_upstream("https://198.18.2.2:4433/"),
            Ok(("198.18.2.2".into(), 4433))
        );
        assert_eq!(parse_upstream("https://[::1]:9"), Ok(("::1".into(), 9)));
        for bad in [
            "http://a",
            "a:1",
            "https://a/x",
            "https://",
            "",
            "https://a:99999",
        ] {
            assert!(parse_upstream(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn upstream_parser_never_panics(s in "\\PC{0,40}") {
            let _ = parse_upstream(&s);
        }
    }
}
