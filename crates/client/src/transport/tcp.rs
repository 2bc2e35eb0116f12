//! TCP connect + TLS handshake, shared by HTTP/1.1 and HTTP/2.

use std::sync::Arc;

use qbench_core::{ErrorKind, HandshakeInfo};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::{step, Endpoint, FetchError};
use crate::tls::TicketStore;

pub struct TlsTcp {
    pub endpoint: Endpoint,
    pub connector: TlsConnector,
    pub tickets: Option<Arc<TicketStore>>,
    /// ALPN the server must select; `None` accepts a server that selects nothing.
    pub alpn: &'static [u8],
    pub alpn_required: bool,
}

impl TlsTcp {
    pub fn new(
        endpoint: Endpoint,
        cfg: rustls::ClientConfig,
        tickets: Option<Arc<TicketStore>>,
        alpn: &'static [u8],
        alpn_required: bool,
    ) -> Self {
        TlsTcp {
            endpoint,
            connector: TlsConnector::from(Arc::new(cfg)),
            tickets,
            alpn,
            alpn_required,
        }
    }

    pub async fn connect(&self) -> Result<(TlsStream<TcpStream>, HandshakeInfo), FetchError> {
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
            TcpStream::connect(ep.addr),
        )
        .await?;
        tcp.set_nodelay(true)
            .map_err(|e| FetchError::from_err("TCP_NODELAY", &e))?;
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
        };
        Ok((tls, info))
    }
}
