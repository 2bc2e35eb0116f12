//! `--link-b` and `--proxy`: a path of two emulated segments joined by a middle host, and
//! fetching through `qbench proxy` there (IMC'17 Figures 16-18).

use clap::Args;
use qbench_core::spec::link::LinkSpec;
use qbench_core::spec::ProxyChoice;
use qbench_core::Protocol;

#[derive(Debug, Clone, Args)]
pub struct ChainArgs {
    /// The server's segment, beyond a middle host that joins it to --link (--link-a, the
    /// client's segment); same fields as --link. Root
    #[arg(long, value_name = "SPEC", requires = "link")]
    pub link_b: Option<LinkSpec>,

    /// Fetch through `qbench proxy` on the middle host, which relays over its own h2 or h3
    /// connection to the server (needs --link-b); without it, straight across both segments
    #[arg(long, value_name = "PROTO", value_parser = parse_proxy, requires = "link_b")]
    pub proxy: Option<Protocol>,
}

fn parse_proxy(s: &str) -> Result<Protocol, String> {
    match s.parse::<ProxyChoice>()?.protocol() {
        Some(p) => Ok(p),
        None => Err("h2 or h3 (without --proxy, the client goes straight to the server)".into()),
    }
}
