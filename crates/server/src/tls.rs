//! One certificate and one rustls configuration behind both stacks, differing only in ALPN.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("reading {what} from {path}: {message}")]
    Read {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("{path} holds no certificate")]
    NoCertificate { path: PathBuf },
    #[error("TLS configuration rejected: {0}")]
    Config(#[from] rustls::Error),
}

/// Certificate chain and key; `pem` is what a client pins with `--ca`.
#[derive(Debug)]
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub pem: String,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
            pem: self.pem.clone(),
        }
    }
}

impl Identity {
    /// Self-signed, valid for localhost, the loopback addresses and any extra names given.
    pub fn self_signed(extra_names: &[String]) -> Result<Self, TlsError> {
        let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
        names.extend(extra_names.iter().cloned());
        let ck = rcgen::generate_simple_self_signed(names)?;
        Ok(Self {
            chain: vec![ck.cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into()),
            pem: ck.cert.pem(),
        })
    }

    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        fn read_err<'a>(
            what: &'static str,
            path: &'a Path,
        ) -> impl Fn(rustls::pki_types::pem::Error) -> TlsError + 'a {
            move |e| TlsError::Read {
                what,
                path: path.to_path_buf(),
                message: e.to_string(),
            }
        }
        // Read whole within the limit first: a FIFO or /dev/zero states no size.
        let read = |what: &'static str, path: &Path| {
            std::fs::File::open(path)
                .map_err(qbench_core::spec::input::InputError::from)
                .and_then(|f| {
                    qbench_core::spec::input::read_text_capped(
                        f,
                        qbench_core::spec::input::MAX_PEM_BYTES,
                        "a PEM file",
                    )
                })
                .map_err(|e| TlsError::Read {
                    what,
                    path: path.to_path_buf(),
                    message: e.to_string(),
                })
        };
        let pem = read("certificates", cert)?;
        let chain = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(read_err("certificates", cert))?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: cert.to_path_buf(),
            });
        }
        let key_pem = read("private key", key)?;
        let key_der = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(read_err("private key", key))?;
        Ok(Self {
            chain,
            key: key_der,
            pem,
        })
    }
}

/// TLS 1.3 only, resumption tickets on, 0-RTT allowed (quinn requires `u32::MAX` or 0).
pub fn server_config(
    identity: &Identity,
    alpn: Vec<Vec<u8>>,
    early_data: bool,
    key_log: Option<Arc<qbench_stack::keylog::KeyLogTo>>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(qbench_stack::crypto::provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())?;
    cfg.alpn_protocols = alpn;
    if early_data {
        cfg.max_early_data_size = u32::MAX;
    }
    if let Some(k) = key_log {
        cfg.key_log = k;
    }
    Ok(Arc::new(cfg))
}
