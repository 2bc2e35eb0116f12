//! `qbench-server` as a process: out of file descriptors, its open-file limit, and the
//! certificate file it writes next to other people's files, and the environment it refuses.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::needs::{require, Need};
use common::{client_tls, HALF_CLIENT_HELLO, WAIT};
use rustls::pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const BIN: &str = env!("CARGO_BIN_EXE_qbench-server");

/// A running server and the lines it printed so far.
struct Server {
    child: Child,
    addr: std::net::SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `prlimit --nofile=LIMIT qbench-server ARGS` (no prlimit when `nofile` is None).
    fn start(nofile: Option<&str>, args: &[&str]) -> Result<Self, String> {
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}")).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        let mut child = cmd
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let Some(addr) = first.strip_prefix("qbench-server listening on ") else {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
            let status = child.wait().unwrap();
            return Err(format!("{status}: {first}{rest}"));
        };
        let addr = addr.split_whitespace().next().unwrap().parse().unwrap();
        let lines = Arc::new(Mutex::new(vec![first]));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for l in stderr.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        Ok(Self { child, addr, lines })
    }

    fn count(&self, needle: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// User plus system CPU time of the server so far, in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after_name.split_whitespace().collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    }

    fn stop(&mut self) -> std::process::ExitStatus {
        self.stop_with(libc::SIGTERM)
    }

    fn stop_with(&mut self, sig: i32) -> std::process::ExitStatus {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    /// A failed assertion must not leave the server running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn hold(addr: std::net::SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(HALF_CLIENT_HELLO).await.unwrap();
        held.push(c);
    }
    held
}

async fn handshake(addr: std::net::SocketAddr, cert: &Path) {
    let pem = std::fs::read_to_string(cert).unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_tls(&pem, b"h2")));
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(WAIT, connector.connect(name, tcp))
        .await
        .expect("handshake within the bound")
        .expect("handshake");
}

/// A TCP-only server under `prlimit --nofile=NOFILE` that holds unfinished handshakes.
fn holding_server(nofile: &str, cert: &Path) -> Server {
    let c = cert.to_str().unwrap();
    let args = [
        "--protocols",
        "h1,h2",
        "--handshake-timeout",
        "60s",
        "--cert-out",
        c,
    ];
    Server::start(Some(nofile), &args).unwrap()
}

#[tokio::test]
async fn out_of_descriptors_the_accept_loop_backs_off_and_recovers() {
    require!(Need::Tool("prlimit"));
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let mut s = holding_server("64:64", &cert);
    let held = hold(s.addr, 80).await;
    // Once the loop has hit the limit (its line, waited for), watch it for two seconds.
    common::eventually("the limit logged", || s.count("accept failed") > 0).await;
    let before = s.cpu_ticks();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spent = s.cpu_ticks() - before;
    assert!(
        spent < 50,
        "{spent} ticks of CPU in 2 s while out of descriptors"
    );
    assert_eq!(s.count("accept failed"), 1, "one line per burst");
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    handshake(s.addr, &cert).await;
    common::eventually("recovery logged", || s.count("accepting again") > 0).await;
    assert!(s.stop().success());
}

#[tokio::test]
async fn the_soft_descriptor_limit_is_raised_to_the_hard_one() {
    require!(Need::Tool("prlimit"));
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let mut s = holding_server("64:4096", &cert);
    let _held = hold(s.addr, 80).await;
    handshake(s.addr, &cert).await;
    assert_eq!(s.count("accept failed"), 0);
    assert!(s.stop().success());
}

#[test]
fn an_existing_cert_out_file_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "precious").unwrap();
    let err = Server::start(None, &["--cert-out", path.to_str().unwrap()])
        .err()
        .expect("refuses to start");
    assert!(
        err.contains("--cert-out") && err.contains("--force"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
}

#[test]
fn two_servers_in_one_directory_keep_their_files_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qbench-cert.pem");
    let p = path.to_str().unwrap();
    let mut first = Server::start(None, &["--cert-out", p]).unwrap();
    let mine = std::fs::read_to_string(&path).unwrap();
    assert!(
        Server::start(None, &["--cert-out", p]).is_err(),
        "second refuses"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        mine,
        "first's file intact"
    );

    // With --force the second replaces the file; the first, stopping, leaves it alone.
    let mut second = Server::start(None, &["--cert-out", p, "--force"]).unwrap();
    let theirs = std::fs::read_to_string(&path).unwrap();
    assert_ne!(theirs, mine);
    assert!(first.stop().success());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs);
    assert!(second.stop().success());
    assert!(!path.exists(), "the second removed its own file");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_bad_rep_movsb_choice_is_refused_on_one_line() {
    let out = Command::new(BIN)
        .arg("--help")
        .env("QBENCH_REP_MOVSB", "no")
        .output()
        .expect("qbench-server runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "refused before anything else");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: QBENCH_REP_MOVSB: `no` is neither `keep` nor `raise`\n"
    );
}

/// SIGINT, SIGTERM and SIGHUP (a closed terminal, a supervisor) all end the server cleanly:
/// its last line is written and the certificate it generated is removed.
#[test]
fn every_stopping_signal_ends_the_server_cleanly() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        let mut s = Server::start(None, &["--cert-out", cert.to_str().unwrap()]).unwrap();
        assert!(cert.exists());
        let status = s.stop_with(sig);
        assert!(status.success(), "signal {sig}: {status}");
        assert!(!cert.exists(), "signal {sig} left the certificate behind");
        let deadline = std::time::Instant::now() + WAIT;
        while s.count("stopped after") == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "signal {sig}: no last line"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A bad `TOKIO_WORKER_THREADS` is bad input: one line naming it, status 2 (as clap's errors).
#[test]
fn a_bad_worker_count_in_the_environment_exits_2() {
    let out = Command::new(BIN)
        .env("TOKIO_WORKER_THREADS", "abc")
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: ") && err.contains("TOKIO_WORKER_THREADS"),
        "{err}"
    );
}

/// A server whose terminal has closed (its stderr reader gone) still stops cleanly on SIGHUP
/// and SIGTERM: its last line has nowhere to go, which must not be a panic (status 101).
#[test]
fn a_closed_terminal_does_not_make_the_last_line_a_panic() {
    for sig in [libc::SIGHUP, libc::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        let mut child = Command::new(BIN)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--cert-out",
                cert.to_str().unwrap(),
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        // The reader and the pipe are dropped here: stderr is closed.
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        assert!(status.success(), "signal {sig}: {status}");
        assert!(!cert.exists());
    }
}
