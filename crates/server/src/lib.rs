//! qbench-server: the matched server. HTTP/3 (quinn + h3) on UDP and HTTP/2 + HTTP/1.1
//! (hyper + tokio-rustls) on TCP, on the same port number, behind one rustls configuration,
//! serving `GET /bytes/{n}` from one shared buffer.

pub mod access;
pub mod body;
pub mod cc;
#[cfg(feature = "cli")]
pub mod cli;
pub mod coalesce;
pub mod conn_io;
pub mod cpu;
pub mod h2_conn_task;
pub mod h3srv;

pub mod options;
pub mod records;
pub mod relay;
mod relay_body;
mod relay_stats;
pub mod request;
pub mod routes;
pub mod shared;
pub mod stall;
pub mod standalone;
pub mod tcpsrv;
pub mod telemetry;
pub mod tls;
pub mod truth;
pub mod upstream;

use std::io;
use std::net::{SocketAddr, TcpListener as StdTcpListener, UdpSocket};
use std::sync::Arc;

use qbench_core::report::sender::TlsRecords;
use qbench_core::CpuTimes;

pub use options::{ServerOptions, TelemetryAccess};
use qbench_core::wire::{Protocol, ALPN_H1, ALPN_H2, ALPN_H3, UDP_BUFFER};
use shared::Shared;
pub use shared::Stats;
pub use tls::Identity;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Access(#[from] access::AccessError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("QUIC rejected the TLS configuration: {0}")]
    Quic(String),
    #[error("--keylog {path}: {source}")]
    KeyLog {
        path: std::path::PathBuf,
        source: io::Error,
    },
    #[error("--protocols is empty: nothing to serve")]
    NoProtocols,
    #[error("starting the server runtime: {0}")]
    Runtime(io::Error),
    #[error("--cert-out {path}: the file exists and this server did not write it; pass another --cert-out, or --force to replace it")]
    CertExists { path: std::path::PathBuf },
    #[error("writing the certificate to {path}: {source}")]
    WriteCert {
        path: std::path::PathBuf,
        source: io::Error,
    },
    #[error("waiting for a signal: {0}")]
    Signal(io::Error),
    #[error(transparent)]
    Cc(#[from] cc::CcError),
    #[error("placing the server: {0}")]
    Enter(String),
    #[error("{flag}: applies to the QUIC sender only; TCP windows cannot be capped from inside the process on loopback (the kernel keeps no route metrics there). Serve h3 alone (--protocols h3)")]
    TcpCap { flag: &'static str },
}

/// A bound, not yet running server. Binding needs a tokio runtime context.
pub struct Server {
    shared: Arc<Shared>,
    identity: Identity,
    tcp: Option<(tokio::net::TcpListener, tokio_rustls::TlsAcceptor)>,
    /// One endpoint per socket of the QUIC port's group (`qbench_stack::reuseport`).
    quic: Vec<quinn::Endpoint>,
    /// The endpoints' server configuration, for `relay_to` to bound a proxy's send window.
    quic_config: Option<quinn::ServerConfig>,
    addr: SocketAddr,
}

fn tcp_listener(addr: SocketAddr) -> io::Result<StdTcpListener> {
    let l = StdTcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Binds TCP and UDP on one port number; with port 0, retries until both get the same one.
fn bind_pair(
    addr: SocketAddr,
    tcp: bool,
    udp: bool,
) -> Result<(Option<StdTcpListener>, Option<UdpSocket>, SocketAddr), ServerError> {
    let bind_err = |source| ServerError::Bind { addr, source };
    let mut last_err = None;
    for _ in 0..32 {
        let t = if tcp {
            Some(tcp_listener(addr).map_err(bind_err)?)
        } else {
            None
        };
        let port_addr = match &t {
            Some(l) => l.local_addr().map_err(bind_err)?,
            None => addr,
        };
        if !udp {
            return Ok((t, None, port_addr));
        }
        match qbench_stack::reuseport::bind(port_addr, UDP_BUFFER) {
            Ok(u) => {
                let local = u.local_addr().map_err(bind_err)?;
                return Ok((t, Some(u), local));
            }
            Err(e) if addr.port() == 0 && e.kind() == io::ErrorKind::AddrInUse => {
                last_err = Some(e)
            }
            Err(e) => return Err(bind_err(e)),
        }
    }
    Err(bind_err(last_err.unwrap_or_else(|| {
        io::Error::from(io::ErrorKind::AddrInUse)
    })))
}

/// Which of h1, h2 and h3 `opts` serves; an error if none, or if a TCP protocol is served
/// with an option TCP cannot honour.
fn served(opts: &ServerOptions) -> Result<(bool, bool, bool), ServerError> {
    let (h1, h2, h3) = (
        opts.serves(Protocol::H1),
        opts.serves(Protocol::H2),
        opts.serves(Protocol::H3),
    );
    if !(h1 || h2 || h3) {
        return Err(ServerError::NoProtocols);
    }
    if h1 || h2 {
        cc::check_tcp(opts.cc)?;
        for (set, flag) in [
            (opts.cwnd_cap.is_some(), "--cwnd-cap"),
            (opts.initial_cwnd.is_some(), "--initial-cwnd"),
            (opts.reorder_threshold.is_some(), "--reorder-threshold"),
            (
                opts.reorder_time_threshold.is_some(),
                "--reorder-time-threshold",
            ),
        ] {
            if set {
                return Err(ServerError::TcpCap { flag });
            }
        }
    }
    Ok((h1, h2, h3))
}

/// Where TLS secrets are logged (`--keylog`), opened once for TCP and QUIC alike.
fn key_log(opts: &ServerOptions) -> Result<Option<KeyLog>, ServerError> {
    opts.keylog
        .as_ref()
        .map(|path| {
            qbench_stack::keylog::KeyLogTo::open(path).map_err(|source| ServerError::KeyLog {
                path: path.clone(),
                source,
            })
        })
        .transpose()
}

type KeyLog = Arc<qbench_stack::keylog::KeyLogTo>;

/// The TCP listener and its TLS acceptor, whose ALPN offers h2, then http/1.1 (those served).
fn bind_tcp(
    l: StdTcpListener,
    addr: SocketAddr,
    identity: &Identity,
    (h1, h2): (bool, bool),
    key_log: Option<KeyLog>,
) -> Result<(tokio::net::TcpListener, tokio_rustls::TlsAcceptor), ServerError> {
    let mut alpn = Vec::new();
    if h2 {
        alpn.push(ALPN_H2.to_vec());
    }
    if h1 {
        alpn.push(ALPN_H1.to_vec());
    }
    let cfg = tls::server_config(identity, alpn, false, key_log)?;
    let listener = tokio::net::TcpListener::from_std(l)
        .map_err(|source| ServerError::Bind { addr, source })?;
    Ok((listener, tokio_rustls::TlsAcceptor::from(cfg)))
}

/// The QUIC side of a bound server.
struct Quic {
    /// One endpoint per socket of the port's group.
    endpoints: Vec<quinn::Endpoint>,
    config: quinn::ServerConfig,
    /// A second handle to the group's first socket.
    udp: Option<Arc<UdpSocket>>,
}

/// The endpoints' configuration: TLS with h3 and 0-RTT, the transport `opts` ask for, and
/// a bound on handshakes waiting for the accept loop, which cost memory too.
fn quic_config(
    identity: &Identity,
    opts: &ServerOptions,
    key_log: Option<KeyLog>,
) -> Result<quinn::ServerConfig, ServerError> {
    let cfg = tls::server_config(identity, vec![ALPN_H3.to_vec()], true, key_log)?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(cfg)
        .map_err(|e| ServerError::Quic(e.to_string()))?;
    let mut sc = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    sc.transport_config(Arc::new(h3srv::transport(opts)));
    sc.max_incoming(opts.max_connections as usize);
    Ok(sc)
}

/// `sock` as a group of `sockets` sockets on its port, each with an endpoint of its own.
fn bind_quic(
    sock: UdpSocket,
    addr: SocketAddr,
    sockets: usize,
    config: quinn::ServerConfig,
    opts: &ServerOptions,
) -> Result<Quic, ServerError> {
    let bind_err = |source| ServerError::Bind { addr, source };
    let group = qbench_stack::reuseport::group(sock, sockets, UDP_BUFFER).map_err(bind_err)?;
    for s in &group {
        if let Some(b) = opts.quic.rcvbuf {
            qbench_stack::sockopt::force_receive_buffer(s, b.0).map_err(bind_err)?;
        }
        if let Some(b) = opts.quic.sndbuf {
            qbench_stack::sockopt::force_send_buffer(s, b.0).map_err(bind_err)?;
        }
    }
    let count = group.len();
    let (mut endpoints, mut udp) = (Vec::new(), None);
    for (i, sock) in group.into_iter().enumerate() {
        // The endpoint owns the socket from here; `gro=off` is set on it after quinn
        // has turned GRO on.
        let fd = sock.try_clone().map_err(bind_err)?;
        let ep = quinn::Endpoint::new(
            qbench_stack::reuseport::endpoint_config(
                qbench_stack::quic_knobs::endpoint_config(&opts.quic),
                i,
                count,
            ),
            Some(config.clone()),
            sock,
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(bind_err)?;
        if let Some(on) = opts.quic.gro {
            qbench_stack::quic_knobs::set_gro(&fd, on).map_err(bind_err)?;
        }
        udp.get_or_insert_with(|| Arc::new(fd));
        endpoints.push(ep);
    }
    Ok(Quic {
        endpoints,
        config,
        udp,
    })
}

/// What every connection shares: the telemetry access (`--telemetry`, with the token from
/// the environment if set there), the QUIC socket and the qlog configuration.
fn shared_state(opts: ServerOptions, quic: Option<&Quic>) -> Result<Shared, ServerError> {
    let env_token = std::env::var(access::TOKEN_ENV).ok();
    let access = access::Access::new(opts.telemetry, env_token)?;
    let mut shared = Shared::new(opts, access);
    shared.udp = quic.and_then(|q| q.udp.clone());
    // A qlogged connection gets the endpoints' configuration with its own qlog stream.
    if let (Some(dir), Some(q)) = (&shared.opts.qlog, quic) {
        shared.qlog = Some(shared::QuicQlog {
            dir: qbench_stack::qlog::QlogDir::new(dir, shared.opts.qlog_sample, "server"),
            base: q.config.clone(),
        });
    }
    Ok(shared)
}

impl Server {
    /// Binds the server's port: TCP once, UDP as `sockets` sockets with an endpoint each (one
    /// per runtime thread, see `qbench_stack::reuseport::sockets_for`).
    pub fn bind(
        opts: ServerOptions,
        identity: Identity,
        sockets: usize,
    ) -> Result<Self, ServerError> {
        let (h1, h2, h3) = served(&opts)?;
        let key_log = key_log(&opts)?;
        let (tcp, udp, addr) = bind_pair(opts.listen, h1 || h2, h3)?;
        let tcp = match tcp {
            Some(l) => Some(bind_tcp(l, addr, &identity, (h1, h2), key_log.clone())?),
            None => None,
        };
        let quic = match udp {
            Some(sock) => {
                let config = quic_config(&identity, &opts, key_log)?;
                Some(bind_quic(sock, addr, sockets, config, &opts)?)
            }
            None => None,
        };
        let shared = shared_state(opts, quic.as_ref())?;
        let (quic, quic_config) = match quic {
            Some(q) => (q.endpoints, Some(q.config)),
            None => (Vec::new(), None),
        };
        Ok(Self {
            shared: Arc::new(shared),
            identity,
            tcp,
            quic,
            quic_config,
            addr,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Makes this server a split-connection proxy (`qbench proxy`): requests are relayed to
    /// `up` instead of answered here, except its own telemetry. Before `run`.
    pub fn relay_to(&mut self, up: relay::Upstream) {
        let Some(shared) = Arc::get_mut(&mut self.shared) else {
            return;
        };
        shared.upstream = Some(up);
        // A proxy's bodies are copies held until the client acknowledges them: its send
        // window per connection is what one upstream connection may bring (unless set).
        if let (Some(sc), None) = (&self.quic_config, shared.opts.quic.send_window) {
            let mut t = h3srv::transport(&shared.opts);
            t.send_window(u64::from(relay::RELAY_CONN_WINDOW));
            let mut sc = sc.clone();
            sc.transport_config(Arc::new(t));
            for ep in &self.quic {
                ep.set_server_config(Some(sc.clone()));
            }
            if let Some(q) = shared.qlog.as_mut() {
                q.base = sc;
            }
        }
    }

    pub fn cert_pem(&self) -> &str {
        &self.identity.pem
    }

    /// The token `--telemetry token` asks of clients.
    pub fn telemetry_token(&self) -> Option<&str> {
        self.shared.access.token()
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.shared.stats.clone()
    }

    /// What the server sees of connections and requests, once enabled.
    pub fn truth(&self) -> Arc<truth::TruthLog> {
        self.shared.truth.clone()
    }

    /// The QUIC endpoints (handles to them), to close the connections when the server stops.
    pub fn quic_endpoints(&self) -> Vec<quinn::Endpoint> {
        self.quic.clone()
    }

    /// UDP sockets the server receives QUIC on: its port's group.
    pub fn udp_sockets(&self) -> usize {
        self.quic.len()
    }

    /// The receive and send buffers the kernel granted its QUIC sockets (all alike).
    pub fn udp_buffers(&self) -> Option<(u64, u64)> {
        let sock = self.shared.udp.as_ref()?;
        qbench_stack::sockopt::buffers(&**sock).ok()
    }

    /// Serves until the returned future is dropped.
    pub async fn run(self) {
        let tcp = self
            .tcp
            .map(|(l, a)| tcpsrv::serve(l, a, self.shared.clone()));
        let quic = (!self.quic.is_empty()).then(|| {
            futures_util::future::join_all(
                self.quic
                    .into_iter()
                    .map(|ep| h3srv::serve(ep, self.shared.clone())),
            )
        });
        match (tcp, quic) {
            (Some(t), Some(q)) => {
                tokio::join!(t, q);
            }
            (Some(t), None) => t.await,
            (None, Some(q)) => {
                q.await;
            }
            (None, None) => {}
        }
    }
}

pub fn identity_for(opts: &ServerOptions) -> Result<Identity, ServerError> {
    Ok(match (&opts.cert, &opts.key) {
        (Some(c), Some(k)) => Identity::from_files(c, k)?,
        _ => Identity::self_signed(&opts.cert_names)?,
    })
}

type MakeUpstream = Box<dyn FnOnce() -> Result<relay::Upstream, String> + Send>;

/// What each of the server's runtime threads runs as it starts (e.g. joining a CPU limit).
pub type ThreadHook = Arc<dyn Fn() + Send + Sync>;

/// A server on its own runtime and threads inside this process, so its CPU time can be told
/// apart from the client's. Stops when dropped.
pub struct InProcess {
    addr: SocketAddr,
    cert_pem: String,
    stats: Arc<Stats>,
    truth: Arc<truth::TruthLog>,
    threads: cpu::ThreadGroup,
    worker_threads: usize,
    udp_sockets: usize,
    udp_buffers: Option<(u64, u64)>,
    tls_records: TlsRecords,
    runtime: Option<tokio::runtime::Runtime>,
}

impl InProcess {
    pub fn start(opts: ServerOptions, worker_threads: usize) -> Result<Self, ServerError> {
        Self::build(opts, worker_threads, None, None)
    }

    /// Starts the server from a new thread that first runs `enter` (e.g. a `setns` into a
    /// network namespace): the runtime's threads, created there, inherit what it set up.
    pub fn start_in(
        opts: ServerOptions,
        worker_threads: usize,
        enter: impl FnOnce() -> Result<(), String> + Send + 'static,
        on_thread: Option<ThreadHook>,
    ) -> Result<Self, ServerError> {
        std::thread::spawn(move || {
            enter().map_err(ServerError::Enter)?;
            Self::build(opts, worker_threads, None, on_thread)
        })
        .join()
        .map_err(|_| ServerError::Enter("server start thread panicked".into()))?
    }

    /// As `start_in`, a `qbench proxy` relaying to what `upstream` makes (inside the new
    /// runtime, where a QUIC endpoint can bind, in the place `enter` chose).
    pub fn start_relay_in(
        opts: ServerOptions,
        worker_threads: usize,
        enter: impl FnOnce() -> Result<(), String> + Send + 'static,
        upstream: impl FnOnce() -> Result<relay::Upstream, String> + Send + 'static,
    ) -> Result<Self, ServerError> {
        std::thread::spawn(move || {
            enter().map_err(ServerError::Enter)?;
            Self::build(opts, worker_threads, Some(Box::new(upstream)), None)
        })
        .join()
        .map_err(|_| ServerError::Enter("proxy start thread panicked".into()))?
    }

    fn build(
        opts: ServerOptions,
        worker_threads: usize,
        upstream: Option<MakeUpstream>,
        on_thread: Option<ThreadHook>,
    ) -> Result<Self, ServerError> {
        let identity = identity_for(&opts)?;
        let tls_records = opts.tls_records;
        let threads = cpu::ThreadGroup::default();
        let reg = threads.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name("qbench-server")
            .enable_all()
            .on_thread_start(move || {
                reg.register_current();
                if let Some(hook) = &on_thread {
                    hook();
                }
            })
            .build()
            .map_err(ServerError::Runtime)?;
        let server = {
            let _ctx = rt.enter();
            let sockets = qbench_stack::reuseport::sockets_for(worker_threads);
            let mut server = Server::bind(opts, identity, sockets)?;
            if let Some(make) = upstream {
                server.relay_to(make().map_err(ServerError::Enter)?);
            }
            server
        };
        let addr = server.local_addr();
        let cert_pem = server.cert_pem().to_string();
        let stats = server.stats();
        let truth = server.truth();
        let udp_sockets = server.udp_sockets();
        let udp_buffers = server.udp_buffers();
        rt.spawn(server.run());
        Ok(Self {
            addr,
            cert_pem,
            stats,
            truth,
            threads,
            worker_threads: worker_threads.max(1),
            udp_sockets,
            udp_buffers,
            tls_records,
            runtime: Some(rt),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// What the server sees of connections and requests: `enable` it, `take` it per run.
    pub fn truth(&self) -> Arc<truth::TruthLog> {
        self.truth.clone()
    }

    /// Worker threads of the server's runtime.
    pub fn worker_threads(&self) -> usize {
        self.worker_threads
    }

    /// UDP sockets the server receives QUIC on (0 when it serves no h3).
    pub fn udp_sockets(&self) -> usize {
        self.udp_sockets
    }

    /// The receive and send buffers the kernel granted its QUIC sockets.
    pub fn udp_buffers(&self) -> Option<(u64, u64)> {
        self.udp_buffers
    }

    /// How its h1 and h2 connections cut TLS records.
    pub fn tls_records(&self) -> TlsRecords {
        self.tls_records
    }

    /// CPU used by the server's threads so far.
    pub fn cpu(&self) -> CpuTimes {
        self.threads.cpu()
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// `eprintln!` that never panics: a server whose terminal closed (SIGHUP, a dropped ssh
/// session) must still stop cleanly, and its last line has nowhere to go.
#[macro_export]
macro_rules! note {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
