//! Raw transfers on loopback with the same stacks and settings qbench uses, minus HTTP and
//! qbench itself: one quinn stream, and one tokio-rustls connection. They are the ceilings
//! qbench's h3 and h2 goodput are judged against.
//!
//! Like qbench's default, the server runs on its own single-worker tokio runtime and the client
//! on another, in one process; CPU is the whole process's, so it covers both ends.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use qbench_engine::cpu::process_cpu;
use qbench_server::options::ServerOptions;
use qbench_server::tls::{server_config, Identity};
use qbench_stack::payload::Chunks;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

const ALPN: &[u8] = b"qbench-raw";
/// The client's per-stream receive window, as qbench's h3 transport sets it.
const STREAM_WINDOW: u32 = 16 * 1024 * 1024;
const READ_BUF: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// One quinn bidirectional stream, written with `write_chunk` (no copy).
    Quic,
    /// The same, written with `write` (one copy into quinn's send buffer, which is what
    /// h3-quinn's send stream does with every DATA frame).
    QuicCopy,
    /// One TLS 1.3 connection over kernel TCP (tokio-rustls).
    TlsTcp,
}

/// One transfer of `bytes` from server to client.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub bytes: u64,
    /// Request written -> last byte read.
    pub elapsed: Duration,
    /// User + system CPU of the whole process over the same span.
    pub cpu_s: f64,
}

impl Outcome {
    pub fn goodput_bps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64()
    }
}

fn runtime(name: &str) -> Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .context("starting a tokio runtime")
}

/// Serves transfers of the requested length until dropped.
pub struct Baseline {
    kind: Kind,
    /// `None` only while dropping.
    server_rt: Option<Runtime>,
    client_rt: Runtime,
    addr: SocketAddr,
    cert: CertificateDer<'static>,
}

impl Baseline {
    pub fn start(kind: Kind) -> Result<Self> {
        let server_rt = runtime("raw-server")?;
        let client_rt = runtime("raw-client")?;
        let id = Identity::self_signed(&[]).context("server certificate")?;
        let tls = server_config(&id, vec![ALPN.to_vec()], false, None).context("server TLS")?;
        let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let addr = match kind {
            Kind::Quic | Kind::QuicCopy => {
                let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
                    .context("QUIC server TLS")?;
                let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
                cfg.transport_config(Arc::new(qbench_server::h3srv::transport(
                    &ServerOptions::loopback(),
                )));
                let sock = udp_socket(listen)?;
                let _guard = server_rt.enter();
                let ep = quinn::Endpoint::new(
                    quinn::EndpointConfig::default(),
                    Some(cfg),
                    sock,
                    Arc::new(quinn::TokioRuntime),
                )
                .context("QUIC server endpoint")?;
                let addr = ep.local_addr()?;
                server_rt.spawn(serve_quic(ep, kind == Kind::QuicCopy));
                addr
            }
            Kind::TlsTcp => {
                let listener = server_rt
                    .block_on(tokio::net::TcpListener::bind(listen))
                    .context("binding the TCP listener")?;
                let addr = listener.local_addr()?;
                server_rt.spawn(serve_tcp(listener, tokio_rustls::TlsAcceptor::from(tls)));
                addr
            }
        };
        Ok(Self {
            kind,
            server_rt: Some(server_rt),
            client_rt,
            addr,
            cert: id.chain[0].clone(),
        })
    }

    fn client_tls(&self) -> Result<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.clone())?;
        let provider = Arc::new(qbench_stack::crypto::provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = vec![ALPN.to_vec()];
        Ok(cfg)
    }

    /// One fresh connection fetching `bytes`.
    pub fn transfer(&self, bytes: u64) -> Result<Outcome> {
        let tls = self.client_tls()?;
        let addr = self.addr;
        match self.kind {
            Kind::Quic | Kind::QuicCopy => self.client_rt.block_on(fetch_quic(addr, tls, bytes)),
            Kind::TlsTcp => self.client_rt.block_on(fetch_tcp(addr, tls, bytes)),
        }
    }
}

impl Drop for Baseline {
    fn drop(&mut self) {
        // Server tasks hold sockets; stopping the runtime closes them before the client's goes.
        if let Some(rt) = self.server_rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

fn udp_socket(addr: SocketAddr) -> Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    // The buffers qbench's client and server ask for.
    let _ = s.set_recv_buffer_size(qbench_core::wire::UDP_BUFFER);
    let _ = s.set_send_buffer_size(qbench_core::wire::UDP_BUFFER);
    s.bind(&addr.into())?;
    Ok(s.into())
}

async fn serve_quic(ep: quinn::Endpoint, copy: bool) {
    while let Some(incoming) = ep.accept().await {
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                tokio::spawn(async move {
                    let mut len = [0u8; 8];
                    if recv.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    for chunk in Chunks::new(u64::from_be_bytes(len)) {
                        let sent = match copy {
                            true => send.write_all(&chunk).await.map_err(|_| ()),
                            false => send.write_chunk(chunk).await.map_err(|_| ()),
                        };
                        if sent.is_err() {
                            return;
                        }
                    }
                    let _ = send.finish();
                    let _ = send.stopped().await;
                });
            }
        });
    }
}

async fn serve_tcp(listener: tokio::net::TcpListener, acceptor: tokio_rustls::TlsAcceptor) {
    while let Ok((tcp, _)) = listener.accept().await {
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut len = [0u8; 8];
            if tls.read_exact(&mut len).await.is_err() {
                return;
            }
            for chunk in Chunks::new(u64::from_be_bytes(len)) {
                if tls.write_all(&chunk).await.is_err() {
                    return;
                }
            }
            let _ = tls.shutdown().await;
        });
    }
}

async fn fetch_quic(addr: SocketAddr, tls: rustls::ClientConfig, bytes: u64) -> Result<Outcome> {
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).context("QUIC client TLS")?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.stream_receive_window(quinn::VarInt::from_u32(STREAM_WINDOW));
    cfg.transport_config(Arc::new(transport));
    let sock = udp_socket(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    let ep = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        sock,
        Arc::new(quinn::TokioRuntime),
    )?;
    let conn = ep
        .connect_with(cfg, addr, "localhost")?
        .await
        .context("QUIC handshake")?;
    let (mut send, mut recv) = conn.open_bi().await?;
    let cpu0 = process_cpu();
    let start = Instant::now();
    send.write_all(&bytes.to_be_bytes()).await?;
    send.finish()?;
    let mut got = 0u64;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await? {
        got += chunk.bytes.len() as u64;
    }
    let outcome = finish(bytes, got, start, cpu0)?;
    conn.close(0u32.into(), b"done");
    ep.wait_idle().await;
    Ok(outcome)
}

async fn fetch_tcp(addr: SocketAddr, tls: rustls::ClientConfig, bytes: u64) -> Result<Outcome> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from("localhost")?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .context("TLS handshake")?;
    let cpu0 = process_cpu();
    let start = Instant::now();
    tls.write_all(&bytes.to_be_bytes()).await?;
    let mut buf = vec![0u8; READ_BUF];
    let mut got = 0u64;
    loop {
        let n = tls.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    finish(bytes, got, start, cpu0)
}

fn finish(bytes: u64, got: u64, start: Instant, cpu0: qbench_core::CpuTimes) -> Result<Outcome> {
    let elapsed = start.elapsed();
    let cpu_s = process_cpu().since(&cpu0).total_s();
    if got != bytes {
        bail!("asked for {bytes} bytes, received {got}");
    }
    Ok(Outcome {
        bytes,
        elapsed,
        cpu_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_baselines_deliver_exactly_the_bytes_asked_for() {
        for kind in [Kind::Quic, Kind::QuicCopy, Kind::TlsTcp] {
            let b = Baseline::start(kind).unwrap();
            for bytes in [0, 1, 300_000, 5_000_000] {
                let o = b.transfer(bytes).unwrap();
                assert_eq!(o.bytes, bytes, "{kind:?}");
                assert!(o.cpu_s >= 0.0);
            }
        }
    }
}
