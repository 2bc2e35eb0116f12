//! TCP connect + TLS handshake, shared by HTTP/1.1 and HTTP/2.

use std::sync::Arc;

use qbench_core::{ErrorKind, HandshakeInfo};
use rustls::pki_types::ServerName;
use std::net::SocketAddr;

use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::activity::{Activity, Counted};
use super::{step, Endpoint, FetchError};
use crate::transport::tls::TicketStore;

/// Connects, with the receive window capped first when asked: SO_RCVBUF (which also turns
/// off receive-buffer autotuning) and TCP_WINDOW_CLAMP.
async fn connect(addr: SocketAddr, rwnd: Option<u32>) -> std::io::Result<TcpStream> {
    let Some(rwnd) = rwnd else {
        return TcpStream::connect(addr).await;
    };
    let sock = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    sock.set_recv_buffer_size(rwnd)?;
    let clamp = rwnd as libc::c_int;
    qbench_stack::sockopt::set(&sock, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, &clamp)?;
    sock.connect(addr).await
}

pub(crate) struct TlsTcp {
    pub endpoint: Endpoint,
    pub connector: TlsConnector,
    pub tickets: Option<Arc<TicketStore>>,
    /// ALPN the server must select; `None` accepts a server that selects nothing.
    pub alpn: &'static [u8],
    pub alpn_required: bool,
}

impl TlsTcp {
    pub(crate) fn new(
        endpoint: Endpoint,
        cfg: rustls::ClientConfig,
        tickets: Option<Arc<TicketStore>>,
        alpn: &'static [u8],
        alpn_required: bool,
    ) -> Self {
        Self {
            endpoint,
            connector: TlsConnector::from(Arc::new(cfg)),
            tickets,
            alpn,
            alpn_required,
        }
    }

    /// Connects, completes TLS and closes both directions, waiting for the server's FIN.
    pub(crate) async fn prime(&self) -> Result<(), FetchError> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut tls, _, _) = self.connect().await?;
        let t = self.endpoint.timeout;
        step("closing the priming connection", t, tls.shutdown()).await?;
        let mut sink = [0u8; 1024];
        // Read until EOF: the server has closed its side, and saved its TCP metrics. A server
        // that closes without close_notify is fine here.
        let drain = async {
            loop {
                match tls.read(&mut sink).await {
                    Ok(0) => return Ok(()),
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        };
        step("closing the priming connection", t, drain).await
    }

    pub(crate) async fn connect(
        &self,
    ) -> Result<(TlsStream<Counted<TcpStream>>, Activity, HandshakeInfo), FetchError> {
        let ep = &self.endpoint;
        let name = ServerName::try_from(ep.server_name.clone()).map_err(|e| {
            FetchError::new(
                ErrorKind::Tls,
                format!("server name {}: {e}", ep.server_name),
            )
        })?;
        let tcp = step(
            &format!("TCP connect to {}", ep.addr),
            ep.timeout,
            connect(ep.addr, ep.rwnd),
        )
        .await?;
        tcp.set_nodelay(true)
            .map_err(|e| FetchError::from_err("TCP_NODELAY", &e))?;
        let local_port = tcp.local_addr().ok().map(|a| a.port());
        let activity = Activity::default();
        let tcp = Counted::new(tcp, activity.clone(), &qbench_stack::activity::CLIENT_TCP);
        let taken_before = self.tickets.as_ref().map(|t| t.tickets_taken());
        let tls = step(
            &format!("TLS handshake with {}", ep.server_name),
            ep.timeout,
            self.connector.connect(name, tcp),
        )
        .await?;
        let conn = tls.get_ref().1;
        let alpn = conn
            .alpn_protocol()
            .map(|a| String::from_utf8_lossy(a).into_owned());
        let selected_ok = match conn.alpn_protocol() {
            Some(a) => a == self.alpn,
            None => !self.alpn_required,
        };
        if !selected_ok {
            return Err(FetchError::new(
                ErrorKind::Alpn,
                format!(
                    "{} selected ALPN {:?}, not {}",
                    ep.server_name,
                    alpn.as_deref().unwrap_or("(none)"),
                    String::from_utf8_lossy(self.alpn)
                ),
            ));
        }
        let info = HandshakeInfo {
            alpn,
            resumption_offered: match (taken_before, &self.tickets) {
                (Some(b), Some(t)) => t.tickets_taken() > b,
                _ => false,
            },
            resumed: Some(matches!(
                conn.handshake_kind(),
                Some(rustls::HandshakeKind::Resumed)
            )),
            early_data_accepted: false,
            local_port,
        };
        Ok((tls, activity, info))
    }
}
