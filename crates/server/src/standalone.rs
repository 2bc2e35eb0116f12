//! `qbench-server` / `qbench serve`: serve until SIGINT or SIGTERM.

use std::path::{Path, PathBuf};

use tokio::signal::unix::{signal, SignalKind};

use crate::{identity_for, Protocol, Server, ServerError, ServerOptions};

/// Where the server writes the certificate a client pins with `--ca`.
pub const DEFAULT_CERT_OUT: &str = "qbench-cert.pem";

/// Removes the certificate file when the server stops: a generated certificate is worthless
/// once its key is gone.
struct CertFile(PathBuf);

impl Drop for CertFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn write_cert(path: &Path, pem: &str) -> Result<CertFile, ServerError> {
    std::fs::write(path, pem).map_err(|source| ServerError::WriteCert {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(CertFile(path.to_path_buf()))
}

pub async fn serve_until_signal(opts: ServerOptions, cert_out: &Path) -> Result<(), ServerError> {
    let generated = opts.cert.is_none();
    let identity = identity_for(&opts)?;
    let protocols: Vec<&str> = opts
        .protocols
        .iter()
        .map(|p| Protocol::as_str(*p))
        .collect();
    let server = Server::bind(opts, identity)?;
    let _cert = if generated {
        Some(write_cert(cert_out, server.cert_pem())?)
    } else {
        None
    };
    eprintln!(
        "qbench-server listening on {} ({}){}",
        server.local_addr(),
        protocols.join(","),
        if generated {
            format!("; certificate for --ca: {}", cert_out.display())
        } else {
            String::new()
        }
    );
    let mut term = signal(SignalKind::terminate()).map_err(ServerError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(ServerError::Signal)?;
    tokio::select! {
        _ = server.run() => {}
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!("qbench-server: stopped");
    Ok(())
}
