//! `raw-requests`: the floor for small objects with the stacks qbench uses and nothing else:
//! no timers, no per-request records, no progress. HTTP/2 is the h2 crate over tokio-rustls;
//! HTTP/3 (`--proto h3`) quinn and the h3 crate over qbench's zero-copy glue, an endpoint per
//! connection; both with qbench's TLS settings. N connections x M streams against a running
//! server, each stream a loop of GET and read the body. Prints one tab-separated line per run
//! (protocol, requests, seconds, requests/s, client CPU seconds, CPU-us per request) and the
//! median rate last. Beside `qbench --proto h2|h3` with the same connections, streams and
//! threads, the difference is qbench's own cost per request.

// qbench's allocator, so that the floor differs from qbench by the request path alone (see
// the `jemalloc` feature in Cargo.toml).
#[cfg(feature = "jemalloc")]
qbench_stack::jemalloc!();

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Parser;
use qbench_engine::cpu::process_cpu;
use qbench_engine::tls::{client_config, Trust};

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Proto {
    H2,
    H3,
}

#[derive(Parser)]
struct Args {
    /// HTTP/2 over TCP, or HTTP/3 over QUIC
    #[arg(long, value_enum, default_value = "h2")]
    proto: Proto,
    /// The server's address, e.g. 127.0.0.1:4433 (a `qbench-server`)
    #[arg(long)]
    target: SocketAddr,
    /// The server's certificate (PEM), as `qbench-server --cert-out` wrote it
    #[arg(long)]
    ca: std::path::PathBuf,
    /// Path of each request (qbench-server: /bytes/N)
    #[arg(long, default_value = "/bytes/1024")]
    path: String,
    /// Requests per run, over all connections
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    requests: u64,
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    connections: u32,
    /// Requests at once on each connection
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    streams: u32,
    /// Worker threads of the client's runtime (1: the calling thread, as qbench does)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// With --threads N: N single-threaded runtimes, each on a thread of its own with every
    /// Nth connection, its driver and its streams, instead of one runtime whose N workers
    /// share every connection (what pinning connections to threads would save)
    #[arg(long)]
    pin: bool,
}

fn main() {
    qbench_stack::rep_movsb::at_start_or_exit();
    qbench_stack::heap::keep_freed_memory();
    if let Err(e) = run(Args::parse()) {
        eprintln!("raw-requests: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<()> {
    // Bounded, as every input qbench reads: /dev/zero is not a certificate.
    let pem = qbench_engine::files::read_bytes(&args.ca, 1 << 20, "--ca")
        .map_err(|e| anyhow::anyhow!("--ca: {e}"))?;
    let pem = String::from_utf8(pem).context("--ca: not PEM text")?;
    let trust = Trust::Pem {
        origin: "localhost".into(),
        pem,
    };
    let alpn: &[u8] = match args.proto {
        Proto::H2 => b"h2",
        Proto::H3 => b"h3",
    };
    let tls = Arc::new(client_config(&trust, alpn, None, false)?);
    let rt = match args.threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        _ if args.pin => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n as usize);
            b
        }
    }
    .enable_all()
    .build()?;
    let mut rates = Vec::new();
    for _ in 0..args.runs {
        let cpu0 = process_cpu();
        let started = Instant::now();
        let done = if args.pin && args.threads > 1 {
            pinned(&args, &tls)?
        } else {
            rt.block_on(one_run(&args, tls.clone(), 0, 1))?
        };
        let secs = started.elapsed().as_secs_f64();
        let cpu = process_cpu().since(&cpu0);
        let cpu_s = cpu.user_s + cpu.sys_s;
        let proto = match args.proto {
            Proto::H2 => "h2",
            Proto::H3 => "h3",
        };
        say(&format!(
            "{proto}\t{done}\t{secs:.3}\t{:.0}\t{cpu_s:.3}\t{:.2}",
            done as f64 / secs,
            cpu_s / done as f64 * 1e6
        ))?;
        rates.push(done as f64 / secs);
    }
    rates.sort_by(f64::total_cmp);
    say(&format!("median\t{:.0} requests/s", rates[rates.len() / 2]))
}

/// Each connection takes its part of the share's requests, and its streams take the next of
/// them until they are taken.
async fn one_run(
    args: &Args,
    tls: Arc<rustls::ClientConfig>,
    share: u32,
    shares: u32,
) -> Result<u64> {
    let uri: http::Uri = format!("https://localhost:{}{}", args.target.port(), args.path)
        .parse()
        .context("--path")?;
    // Each share takes its part of the requests, so that pinned threads share no counter.
    let total = args.requests / u64::from(shares)
        + u64::from(u64::from(share) < args.requests % u64::from(shares));
    if args.proto == Proto::H3 {
        let config = qbench_benches::raw_h3::client_config((*tls).clone())?;
        let share = qbench_benches::raw_h3::Share {
            target: args.target,
            uri: &uri,
            connections: (share..args.connections).step_by(shares as usize).count() as u32,
            streams: args.streams,
            total,
        };
        return qbench_benches::raw_h3::run(share, config).await;
    }
    let mine = (share..args.connections).step_by(shares as usize).count() as u32;
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..mine {
        // Each connection takes its own part of the share's requests, as qbench's do.
        let (next, total) = (
            Arc::new(AtomicU64::new(0)),
            qbench_benches::part(total, mine, k),
        );
        let tcp = tokio::net::TcpStream::connect(args.target)
            .await
            .with_context(|| format!("connecting to {}", args.target))?;
        tcp.set_nodelay(true)?;
        let name = rustls::pki_types::ServerName::try_from("localhost")?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .context("TLS handshake")?;
        let (send, conn) = h2::client::Builder::new()
            .handshake::<_, Bytes>(stream)
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        for _ in 0..args.streams {
            let (send, uri, next) = (send.clone(), uri.clone(), next.clone());
            tasks.spawn(async move {
                let mut done = 0u64;
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let req = http::Request::get(uri.clone()).body(())?;
                    let mut send = send.clone().ready().await?;
                    let (resp, _) = send.send_request(req, true)?;
                    let mut body = resp.await?.into_body();
                    while let Some(chunk) = body.data().await {
                        let chunk = chunk?;
                        let _ = body.flow_control().release_capacity(chunk.len());
                    }
                    done += 1;
                }
                anyhow::Ok(done)
            });
        }
    }
    let mut done = 0;
    while let Some(r) = tasks.join_next().await {
        done += r.context("a stream's task")??;
    }
    Ok(done)
}

/// One run over `--threads` single-threaded runtimes, each with its share of the connections.
fn pinned(args: &Args, tls: &Arc<rustls::ClientConfig>) -> Result<u64> {
    std::thread::scope(|s| {
        let shares: Vec<_> = (0..args.threads)
            .map(|share| {
                let tls = tls.clone();
                s.spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?
                        .block_on(one_run(args, tls, share, args.threads))
                })
            })
            .collect();
        shares.into_iter().try_fold(0, |sum, h| {
            let done = h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a pinned thread panicked")))?;
            Ok(sum + done)
        })
    })
}

/// A line on stdout; a reader that went away is an error, not a panic.
fn say(line: &str) -> Result<()> {
    use std::io::Write;
    writeln!(std::io::stdout(), "{line}").context("writing to stdout")
}
