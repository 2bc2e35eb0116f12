//! Client TLS: pinned or system roots, optional resumption and 0-RTT, and a loud `--insecure`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Resumption};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, NamedGroup, SignatureScheme};

use qbench_stack::keylog::KeyLogTo;

#[derive(Debug, thiserror::Error)]
pub enum ClientTlsError {
    #[error("--ca {path}: {message}")]
    Ca { path: String, message: String },
    #[error("--ca {path}: no certificate found")]
    CaEmpty { path: String },
    #[error("no trusted roots: pass --ca or install system certificates")]
    NoRoots,
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Which certificates the client trusts.
#[derive(Debug, Clone)]
pub enum Trust {
    /// PEM text (the in-process server's certificate, or a --ca file's contents).
    Pem { origin: String, pem: String },
    /// The operating system's store.
    System,
    /// Accept any certificate (--insecure).
    Insecure,
}

/// Observes whether a handshake offered a stored ticket, for the report.
#[derive(Debug)]
pub struct TicketStore {
    inner: ClientSessionMemoryCache,
    taken: AtomicU64,
}

impl TicketStore {
    pub fn tickets_taken(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(server_name, group)
    }
    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }
    fn set_tls12_session(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.inner.set_tls12_session(server_name, value)
    }
    fn tls12_session(
        &self,
        server_name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.inner.tls12_session(server_name)
    }
    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name)
    }
    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.inner.insert_tls13_ticket(server_name, value)
    }
    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        let t = self.inner.take_tls13_ticket(server_name);
        if t.is_some() {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }
        t
    }
}

#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn roots(trust: &Trust) -> Result<rustls::RootCertStore, ClientTlsError> {
    let mut store = rustls::RootCertStore::empty();
    match trust {
        Trust::Pem { origin, pem } => {
            let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ClientTlsError::Ca {
                    path: origin.clone(),
                    message: e.to_string(),
                })?;
            if certs.is_empty() {
                return Err(ClientTlsError::CaEmpty {
                    path: origin.clone(),
                });
            }
            for c in certs {
                store.add(c).map_err(|e| ClientTlsError::Ca {
                    path: origin.clone(),
                    message: e.to_string(),
                })?;
            }
        }
        Trust::System => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(ClientTlsError::NoRoots);
            }
        }
        Trust::Insecure => {}
    }
    Ok(store)
}

/// `--keylog` (or `SSLKEYLOGFILE`): the key log, opened for appending, that a plan's client
/// connections log their secrets to (see [`log_keys`]).
pub fn open_key_log(
    path: Option<&std::path::Path>,
) -> Result<Option<Arc<KeyLogTo>>, crate::error::ConfigError> {
    let Some(path) = path else {
        return Ok(None);
    };
    // Appended to, and so never replaced; but never a block device or a socket either, and
    // `-` is stdout as for every output.
    use crate::output::target::{resolve, Target};
    let at = match resolve(path).map_err(|e| crate::error::ConfigError {
        flag: "--keylog",
        message: e.to_string(),
    })? {
        Target::Stdout => std::path::Path::new("/dev/stdout"),
        Target::Stderr => std::path::Path::new("/dev/stderr"),
        _ => path,
    };
    let log = KeyLogTo::open(at).map_err(|e| crate::error::ConfigError {
        flag: "--keylog",
        message: format!("{}: {e}", path.display()),
    })?;
    Ok(Some(log))
}

/// The connections made with `tls` log their secrets to `to`, if there is one.
pub(crate) fn log_keys(tls: &mut rustls::ClientConfig, to: Option<&Arc<KeyLogTo>>) {
    if let Some(k) = to {
        tls.key_log = k.clone();
    }
}

/// TLS 1.3 client configuration for one protocol.
pub fn client_config(
    trust: &Trust,
    alpn: &[u8],
    tickets: Option<Arc<TicketStore>>,
    early_data: bool,
) -> Result<rustls::ClientConfig, ClientTlsError> {
    let provider = Arc::new(qbench_stack::crypto::provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let mut cfg = match trust {
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth(),
        _ => builder
            .with_root_certificates(roots(trust)?)
            .with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![alpn.to_vec()];
    cfg.resumption = match tickets {
        Some(store) => Resumption::store(store),
        None => Resumption::disabled(),
    };
    cfg.enable_early_data = early_data;
    Ok(cfg)
}

pub(crate) fn ticket_store() -> Arc<TicketStore> {
    Arc::new(TicketStore {
        inner: ClientSessionMemoryCache::new(256),
        taken: AtomicU64::new(0),
    })
}
