//! HTTP/3 peers written with quinn and h3 over the server's own `h3::quic` backend, for tests
//! that need an origin or a client to misbehave in ways qbench's own never do.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use qbench_stack::h3_zero_copy::Connection;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;

/// The content-length an origin announces for a path, and the body it then sends, in parts
/// `PAUSE` apart (an empty part is only a pause).
pub(crate) type Answer = fn(&str) -> (u64, Vec<Bytes>);

/// Between two parts of a body: long enough for what went before to reach the client.
pub(crate) const PAUSE: std::time::Duration = std::time::Duration::from_millis(300);

/// TLS 1.3 with ALPN h3, trusting only the certificates in the PEM file `ca`.
pub(crate) fn client_tls(ca: &Path) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h3".to_vec()];
    cfg
}

/// A QUIC client configuration for `client_tls(ca)` with `transport`.
pub(crate) fn client_config(ca: &Path, transport: quinn::TransportConfig) -> quinn::ClientConfig {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(client_tls(ca)).unwrap();
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport));
    cfg
}

/// A QUIC server endpoint on 127.0.0.1 (ALPN h3, a self-signed certificate written to `ca`)
/// on a runtime of its own, for a peer to serve on: it stops with the runtime.
pub(crate) fn quic_server(ca: &Path) -> (quinn::Endpoint, tokio::runtime::Runtime) {
    let id = qbench_server::Identity::self_signed(&[]).unwrap();
    std::fs::write(ca, &id.pem).unwrap();
    let tls = qbench_server::tls::server_config(&id, vec![b"h3".to_vec()], false, None).unwrap();
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let sc = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let endpoint = {
        let _entered = runtime.enter();
        quinn::Endpoint::server(sc, "127.0.0.1:0".parse().unwrap()).unwrap()
    };
    (endpoint, runtime)
}

/// An HTTP/3 origin on 127.0.0.1 that answers every GET with what `answer` gives for its
/// path, whatever the content-length says, then finishes the stream. It stops with its
/// runtime, when dropped.
pub(crate) struct H3Origin {
    pub(crate) addr: SocketAddr,
    _runtime: tokio::runtime::Runtime,
}

impl H3Origin {
    /// Writes the origin's certificate to `ca`.
    pub(crate) fn start(ca: &Path, answer: Answer) -> Self {
        let (endpoint, runtime) = quic_server(ca);
        let addr = endpoint.local_addr().unwrap();
        runtime.spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                tokio::spawn(serve(incoming, answer));
            }
        });
        Self {
            addr,
            _runtime: runtime,
        }
    }
}

async fn serve(incoming: quinn::Incoming, answer: Answer) {
    let Ok(conn) = incoming.await else { return };
    let built = h3::server::builder()
        .build::<_, Bytes>(Connection::new(conn))
        .await;
    let Ok(mut h3conn) = built else { return };
    while let Ok(Some(resolver)) = h3conn.accept().await {
        tokio::spawn(async move {
            let Ok((req, mut stream)) = resolver.resolve_request().await else {
                return;
            };
            // The whole request first, as qbench-server reads it: the proxy sends none.
            while let Ok(Some(_)) = stream.recv_data().await {}
            let (length, parts) = answer(req.uri().path());
            let head = http::Response::builder()
                .status(200)
                .header(http::header::CONTENT_LENGTH, length)
                .body(())
                .unwrap();
            if stream.send_response(head).await.is_err() {
                return;
            }
            for (i, part) in parts.into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(PAUSE).await;
                }
                if !part.is_empty() && stream.send_data(part).await.is_err() {
                    return;
                }
            }
            let _ = stream.finish().await;
        });
    }
}
