//! `qbench serve` (and the server half of `qbench proxy`): the matched server's files checked
//! before it starts, then the server until a signal.

use std::path::Path;

use anyhow::Context;
use qbench_engine::error::ConfigError;
use qbench_engine::files::check_not_inputs;

use crate::flags::serve::ServeArgs;

/// The server's outputs (`--keylog`, appended to; `--cert-out`, written when the certificate
/// is generated) are none of the files it reads (`--cert`, `--key`, and a proxy's
/// `--upstream-ca`).
pub fn check_outputs(serve: &ServeArgs, upstream_ca: Option<&Path>) -> Result<(), ConfigError> {
    let s = &serve.server;
    let mut inputs: Vec<(&str, &Path)> = Vec::new();
    for (flag, path) in [
        ("--cert", s.cert.as_deref()),
        ("--key", s.key.as_deref()),
        ("--upstream-ca", upstream_ca),
    ] {
        inputs.extend(path.map(|p| (flag, p)));
    }
    let mut outputs: Vec<(&'static str, &Path)> = Vec::new();
    if s.cert.is_none() {
        outputs.push(("--cert-out", &serve.cert_out.cert_out));
    }
    outputs.extend(s.keylog.as_deref().map(|k| ("--keylog", k)));
    check_not_inputs(&outputs, &inputs)
}

pub fn serve(s: Box<ServeArgs>) -> anyhow::Result<()> {
    check_outputs(&s, None)?;
    let rt = s.threads.runtime().context("qbench serve")?;
    rt.block_on(qbench_server::standalone::serve_until_signal(
        s.server,
        &s.cert_out,
        None,
    ))
    .context("qbench serve")
}
