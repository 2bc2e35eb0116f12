//! `--client` and `--server`: which client fetches the objects and which server serves them,
//! qbench's own or a third-party program.

use clap::Args;
use qbench_core::client_program::{ClientChoice, ClientProgram};
use qbench_core::server_program::{ServerChoice, ServerProgram};

fn parse_client(s: &str) -> Result<ClientChoice, String> {
    s.parse()
        .map_err(|e: qbench_core::client_program::ClientError| e.to_string())
}

fn parse_server(s: &str) -> Result<ServerChoice, String> {
    s.parse()
        .map_err(|e: qbench_core::server_program::ServerError| e.to_string())
}

#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The client that fetches the objects: qbench (its own), curl (h1, h2), h2load (h1, h2),
    /// ngtcp2 (h3), quic-go (h3), chromium (h2, h3), or exec:TEMPLATE, a command line with
    /// {urls} or {url}, and {ca} {out} {host} {port} {proto} (see the guide's "Other clients")
    #[arg(long, value_name = "NAME", value_parser = parse_client)]
    pub client: Option<ClientChoice>,

    /// The server that serves the objects, behind the same link: qbench (the in-process
    /// qbench-server), caddy (h1, h2, h3), nginx (h1, h2), quic-go (h3), ngtcp2 (h3),
    /// hypercorn (h1, h2, h3), or exec:TEMPLATE, a command line with {port} and {addr} {cert}
    /// {key} {root} {dir} {threads} {proto} (see the guide's "Other servers as contestants")
    #[arg(long, value_name = "NAME", value_parser = parse_server)]
    pub server: Option<ServerChoice>,
}

impl ClientArgs {
    pub fn program(&self) -> Option<ClientProgram> {
        self.client.as_ref().and_then(|c| c.0.clone())
    }

    pub fn server_program(&self) -> Option<ServerProgram> {
        self.server.as_ref().and_then(|c| c.0.clone())
    }
}
