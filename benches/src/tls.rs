//! TLS 1.3 client and server configurations restricted to one cipher suite.

use std::sync::Arc;

use qbench_server::tls::Identity;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// The AEADs TLS 1.3 and QUIC negotiate in practice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    Aes128Gcm,
    /// What qbench negotiates by default: ring's and aws-lc-rs's providers list it first.
    Aes256Gcm,
    Chacha20,
}

impl Suite {
    pub const ALL: [Self; 3] = [Self::Aes128Gcm, Self::Aes256Gcm, Self::Chacha20];

    /// The name used in benchmark ids and in `qbench cost`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Aes128Gcm => "aes128gcm",
            Self::Aes256Gcm => "aes256gcm",
            Self::Chacha20 => "chacha20",
        }
    }

    fn id(self) -> rustls::CipherSuite {
        match self {
            Self::Aes128Gcm => rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
            Self::Aes256Gcm => rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
            Self::Chacha20 => rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        }
    }

    /// qbench's provider (ring, or aws-lc-rs with that feature) with this suite alone.
    fn provider(self) -> Arc<CryptoProvider> {
        let mut p = qbench_stack::crypto::provider();
        p.cipher_suites.retain(|s| s.suite() == self.id());
        Arc::new(p)
    }
}

/// A self-signed identity for "localhost" and its matching client and server configurations.
pub struct Pair {
    pub client: Arc<ClientConfig>,
    pub server: Arc<ServerConfig>,
}

/// Client and server configurations that can only agree on `suite`, speaking `alpn`.
pub fn pair(suite: Suite, alpn: &[u8]) -> Pair {
    let id = Identity::self_signed(&[]).expect("self-signed certificate");
    let provider = suite.provider();
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3 with this suite")
        .with_no_client_auth()
        .with_single_cert(id.chain.clone(), id.key.clone_key())
        .expect("server certificate");
    server.alpn_protocols = vec![alpn.to_vec()];
    // QUIC requires either no early data or u32::MAX.
    server.max_early_data_size = 0;
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::clone(&id.chain[0]))
        .expect("root certificate");
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3 with this suite")
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![alpn.to_vec()];
    Pair {
        client: Arc::new(client),
        server: Arc::new(server),
    }
}

/// quinn-proto crypto configurations for `suite`. Initial packets always use AES-128-GCM
/// (RFC 9001 section 5.2), so the provider must not be the only source of the initial suite.
pub fn quic_pair(suite: Suite) -> (quinn_proto::ClientConfig, quinn_proto::ServerConfig) {
    use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
    let tls = pair(suite, b"qbench-bench");
    let initial = qbench_stack::crypto::provider()
        .cipher_suites
        .iter()
        .find(|s| s.suite() == rustls::CipherSuite::TLS13_AES_128_GCM_SHA256)
        .and_then(|s| s.tls13())
        .and_then(|s| s.quic_suite())
        .expect("AES-128-GCM initial suite");
    let client = QuicClientConfig::with_initial(tls.client, initial).expect("QUIC client config");
    let server = QuicServerConfig::with_initial(tls.server, initial).expect("QUIC server config");
    (
        quinn_proto::ClientConfig::new(Arc::new(client)),
        quinn_proto::ServerConfig::with_crypto(Arc::new(server)),
    )
}
