//! `--metrics-listen ADDR`: the current run's counts in the OpenMetrics text format, served
//! over HTTP while the command lasts, for Prometheus (or anything that reads the format) to
//! scrape.
//!
//! A network service, so bounded: at most `MAX_CONNECTIONS` connections at once (a new one
//! takes the place of the oldest still sending its head; when all are being answered it is
//! closed), `HEAD_TIMEOUT` to send a request head of at most `MAX_HEAD` bytes, and a response
//! of a fixed set of series whatever the run does. The series are the current run's; a new
//! run starts them afresh, with its own `run` label.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use qbench_core::histogram::LatencyHistogram;
use qbench_core::report::live::Live;
use qbench_core::report::load::IntervalRecord;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Scrapers served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// How long a scraper has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request head read.
pub const MAX_HEAD: usize = 8 * 1024;
/// After the last run, how long qbench waits for a scrape of the final counts (only when
/// something has scraped it before).
pub const FINAL_SCRAPE_WAIT: Duration = Duration::from_secs(30);

/// Latency buckets, seconds: 100 us to 10 s.
const BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// What every series carries: which command, protocol and shard it is.
#[derive(Debug, Clone)]
pub struct Labels {
    pub proto: String,
    pub shard: String,
    pub run_id: String,
}

/// The live counts and who has read them.
pub struct Metrics {
    live: Mutex<Live>,
    labels: Labels,
    /// Bumped by every interval added; a scrape records the one it served.
    generation: AtomicU64,
    served: AtomicU64,
    scrapes: AtomicU64,
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    pub fn new(labels: Labels) -> Arc<Self> {
        Arc::new(Self {
            live: Mutex::new(Live::default()),
            labels,
            generation: AtomicU64::new(0),
            served: AtomicU64::new(0),
            scrapes: AtomicU64::new(0),
        })
    }

    /// Adds interval `r` of run `run`, and the busiest client thread over it.
    pub fn add(&self, run: u32, r: &IntervalRecord, busiest: Option<(String, f64)>) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = live.add(run, r) {
            crate::tell!("warning: --metrics-listen: {e}");
        }
        live.busiest = busiest;
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The exposition, as an OpenMetrics text document.
    pub fn render(&self) -> String {
        let l = self.live.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let base = format!(
            "proto=\"{}\",run=\"{}\",shard=\"{}\",run_id=\"{}\"",
            escape(&self.labels.proto),
            l.run,
            escape(&self.labels.shard),
            escape(&self.labels.run_id)
        );
        let mut out = String::from(
            "# TYPE qbench_requests counter\n# HELP qbench_requests Requests of the current run that ended, by outcome.\n",
        );
        for (outcome, n) in [
            ("completed", l.completed),
            ("failed", l.failed),
            ("dropped", l.dropped),
        ] {
            out.push_str(&format!(
                "qbench_requests_total{{outcome=\"{outcome}\",{base}}} {n}\n"
            ));
        }
        out.push_str("# TYPE qbench_payload_bytes counter\n# HELP qbench_payload_bytes Response body bytes of the current run.\n");
        out.push_str(&format!(
            "qbench_payload_bytes_total{{{base}}} {}\n",
            l.payload_bytes
        ));
        out.push_str("# TYPE qbench_errors counter\n# HELP qbench_errors Errors of the current run, by kind.\n");
        for (kind, n) in &l.errors.0 {
            out.push_str(&format!(
                "qbench_errors_total{{kind=\"{}\",{base}}} {n}\n",
                kind.as_str()
            ));
        }
        out.push_str("# TYPE qbench_in_flight gauge\n# HELP qbench_in_flight Requests on the wire or due when the last interval ended.\n");
        out.push_str(&format!("qbench_in_flight{{{base}}} {}\n", l.in_flight));
        out.push_str("# TYPE qbench_runs_ended gauge\n# HELP qbench_runs_ended Runs of this command that have ended.\n");
        out.push_str(&format!("qbench_runs_ended{{{base}}} {}\n", l.runs_done));
        if let Some((thread, busy)) = &l.busiest {
            out.push_str("# TYPE qbench_client_busiest_thread_ratio gauge\n# HELP qbench_client_busiest_thread_ratio Share of the last interval the busiest client thread was on a CPU; near 1, the client may set the pace.\n");
            out.push_str(&format!(
                "qbench_client_busiest_thread_ratio{{thread=\"{}\",{base}}} {busy}\n",
                escape(thread)
            ));
        }
        histogram(
            &mut out,
            "qbench_latency_seconds",
            "Object latency (request sent, or due in an open loop, to last byte) of the current run.",
            &l.latency,
            &base,
        );
        histogram(
            &mut out,
            "qbench_ttfb_seconds",
            "Time to first byte (request sent to response head) of the current run.",
            &l.ttfb,
            &base,
        );
        if !l.start_lag.is_empty() {
            histogram(
                &mut out,
                "qbench_start_lag_seconds",
                "Open loop: how late requests of the current run were sent after they were due.",
                &l.start_lag,
                &base,
            );
        }
        out.push_str("# EOF\n");
        out
    }

    /// Serves `listener` until the task is dropped. When `MAX_CONNECTIONS` are open, a new
    /// one takes the place of the oldest that has not sent its request head yet: connections
    /// that send nothing cannot keep a scraper out, however many there are. Only when every
    /// one is being answered is the newcomer closed.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        let mut open: std::collections::VecDeque<(tokio::task::JoinHandle<()>, Arc<AtomicBool>)> =
            std::collections::VecDeque::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors, say: try again shortly rather than spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            open.retain(|(task, _)| !task.is_finished());
            if open.len() >= MAX_CONNECTIONS {
                match open
                    .iter()
                    .position(|(_, head)| !head.load(Ordering::SeqCst))
                {
                    Some(i) => {
                        if let Some((task, _)) = open.remove(i) {
                            task.abort();
                        }
                    }
                    None => {
                        drop(stream);
                        continue;
                    }
                }
            }
            let me = self.clone();
            let head = Arc::new(AtomicBool::new(false));
            let read = head.clone();
            let task = tokio::spawn(async move {
                let _ = tokio::time::timeout(HEAD_TIMEOUT * 2, me.answer(stream, &read)).await;
            });
            open.push_back((task, head));
        }
    }

    /// One request, answered and closed: `GET /metrics` (or `/`, or `HEAD`: the same head
    /// without the body), else 404. `head` is set once the request head is in.
    async fn answer(&self, mut s: TcpStream, head_read: &AtomicBool) -> std::io::Result<()> {
        let mut head = Vec::with_capacity(512);
        let mut buf = [0u8; 1024];
        let read = async {
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
                let n = s.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            Ok::<_, std::io::Error>(())
        };
        tokio::time::timeout(HEAD_TIMEOUT, read)
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        head_read.store(true, Ordering::SeqCst);
        let line = String::from_utf8_lossy(&head);
        let mut words = line.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let path = path.split('?').next().unwrap_or("");
        let (status, ctype, body) = match (method, path) {
            ("GET" | "HEAD", "/metrics" | "/") => {
                let generation = self.generation.load(Ordering::SeqCst);
                let body = self.render();
                // A HEAD sees no counts: it is no scrape of them.
                if method == "GET" {
                    self.served.store(generation, Ordering::SeqCst);
                    self.scrapes.fetch_add(1, Ordering::SeqCst);
                }
                if wants_openmetrics(&line) {
                    ("200 OK", OPENMETRICS, body)
                } else {
                    ("200 OK", PROMETHEUS_TEXT, prometheus_text(&body))
                }
            }
            _ => ("404 Not Found", "text/plain", "GET /metrics\n".to_string()),
        };
        let shown = if method == "HEAD" { "" } else { body.as_str() };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{shown}",
            body.len()
        );
        s.write_all(response.as_bytes()).await?;
        s.shutdown().await
    }

    /// After the last run: when something has scraped before, waits (at most
    /// `FINAL_SCRAPE_WAIT`, or until a stopping signal comes) for a scrape of the final counts,
    /// so that the monitoring stack holds what the report holds.
    pub async fn final_scrape(&self) {
        if self.scrapes.load(Ordering::SeqCst) == 0 {
            return;
        }
        let last = self.generation.load(Ordering::SeqCst);
        if self.served.load(Ordering::SeqCst) >= last {
            return;
        }
        // A run that seems to hang after its figures is worse than one that says why it waits.
        crate::tell!(
            "--metrics-listen: waiting up to {} s for a scrape of the final counts (a scraper \
             read this run before; Ctrl-C ends the wait, the report is kept)",
            FINAL_SCRAPE_WAIT.as_secs()
        );
        let deadline = tokio::time::Instant::now() + FINAL_SCRAPE_WAIT;
        while self.served.load(Ordering::SeqCst) < last
            && tokio::time::Instant::now() < deadline
            && qbench_engine::signals::untaken().is_none()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The signal ended this wait, as the line above promised: the run had ended whole, so
        // it is not left for the teardown to call the run interrupted.
        if let Some(sig) = qbench_engine::signals::take() {
            crate::tell!(
                "--metrics-listen: the wait for a final scrape ended on {}; the report stands",
                qbench_engine::signals::name(sig)
            );
        }
    }
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether a request (its head) asks for OpenMetrics, as Prometheus does in its Accept header;
/// one without an Accept header gets it too. Any other (curl's `*/*`, `text/plain`) gets
/// Prometheus's older text format, which every reader of either takes.
fn wants_openmetrics(head: &str) -> bool {
    let accept = head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case("accept").then_some(v)
    });
    accept.is_none_or(|a| a.contains("application/openmetrics-text"))
}

/// The OpenMetrics exposition in Prometheus's text format 0.0.4: a counter's TYPE and HELP
/// name its sample (`X_total`), and no `# EOF` ends it.
fn prometheus_text(om: &str) -> String {
    let counters: Vec<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines().filter(|l| *l != "# EOF") {
        let renamed = ["# TYPE ", "# HELP "].iter().find_map(|p| {
            let (name, tail) = line.strip_prefix(p)?.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// A histogram's series in `BUCKETS`, with its count and sum.
fn histogram(out: &mut String, name: &str, help: &str, h: &LatencyHistogram, base: &str) {
    out.push_str(&format!("# TYPE {name} histogram\n# HELP {name} {help}\n"));
    for le in BUCKETS {
        let n = h.count_at_or_below((le * 1e6).round() as u64);
        out.push_str(&format!("{name}_bucket{{le=\"{le}\",{base}}} {n}\n"));
    }
    let count = h.len();
    out.push_str(&format!("{name}_bucket{{le=\"+Inf\",{base}}} {count}\n"));
    out.push_str(&format!("{name}_count{{{base}}} {count}\n"));
    out.push_str(&format!("{name}_sum{{{base}}} {}\n", h.sum_us() / 1e6));
}

/// Binds `addr` for `--metrics-listen`; a failure names the flag.
pub async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics-listen: cannot listen on {addr}"))
}
