//! A side whose client is a third-party program (`--client`): what it is handed.

use qbench_server::InProcess;

use crate::drive::runner::Plan;
use crate::measure::clock::Clock;
use crate::plan::config::Config;
use crate::setup::prepare::{Peer, Prepared};

/// A third-party client fetching what `plan` asks of `peer`.
pub(super) fn third_party(
    program: &qbench_core::client_program::ClientProgram,
    cfg: &Config,
    peer: &Peer,
    plan: &Plan,
    server: Option<&InProcess>,
    prepared: &Prepared,
    clock: Clock,
) -> anyhow::Result<crate::drive::third_party::ThirdParty> {
    use crate::drive::third_party as tp;
    use crate::transport::tls::Trust;
    let spec = cfg.spec();
    let (ca_pem, insecure) = match &peer.trust {
        Trust::Pem { pem, .. } => (Some(pem.as_str()), false),
        Trust::System => (None, false),
        Trust::Insecure => (None, true),
    };
    let ctx = tp::Ctx {
        program: program.clone(),
        proto: spec.proto,
        objects: tp::objects(&plan.requests),
        connections: plan.connections,
        streams: plan.streams,
        reuse: spec.reuse,
        verify: spec.verify,
        timeout: spec.timeout,
        addr: peer.endpoint.addr,
        host: peer.origin.host.clone(),
        port: peer.origin.port,
        ca: None,
        insecure,
        netns: prepared.link.as_ref().map(|l| l.names().client.clone()),
        path: std::path::PathBuf::new(),
        cpu: prepared
            .cpu
            .as_ref()
            .map(|c| c.process_join())
            .transpose()?,
    };
    Ok(tp::ThirdParty::new(
        ctx,
        ca_pem,
        clock,
        server.map(|s| s.truth()),
        prepared.observer.clone(),
    )?)
}
