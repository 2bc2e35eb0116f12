//! A TCP forwarder a test owns, between qbench and a server on loopback: it can hold the
//! server's bytes on their way, cut the first connection, and counts what the server sent.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A running forwarder.
pub(crate) struct Forwarder {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Bytes the server sent, over every connection, as they are read.
    pub from_server: Arc<AtomicUsize>,
}

/// Forwards TCP connections to `upstream`, the server's bytes held `delay` on their way;
/// with `cut_after`, the first one is cut (both ways, no GOAWAY) after that many bytes from
/// the server, the others are carried whole.
pub(crate) fn forwarder(upstream: u16, cut_after: Option<usize>, delay: Duration) -> Forwarder {
    forward_first(upstream, cut_after, delay, usize::MAX)
}

/// As `forwarder`, but only the first `carried` connections reach the server: those after
/// are accepted and held open, silent, until the forwarder ends.
pub(crate) fn forward_first(
    upstream: u16,
    cut_after: Option<usize>,
    delay: Duration,
    carried: usize,
) -> Forwarder {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let cut_once = Arc::new(AtomicBool::new(cut_after.is_some()));
    let from_server = Arc::new(AtomicUsize::new(0));
    let counted = from_server.clone();
    thread::spawn(move || {
        // At most 16 connections, and for at most a minute.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut accepted = 0;
        let mut silent = Vec::new();
        while accepted < 16 && Instant::now() < deadline {
            let client = match listener.accept() {
                Ok((c, _)) => c,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(_) => return,
            };
            accepted += 1;
            client.set_nonblocking(false).unwrap();
            if accepted > carried {
                silent.push(client);
                continue;
            }
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                return;
            };
            let limit = cut_once
                .swap(false, Ordering::Relaxed)
                .then_some(cut_after)
                .flatten();
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            thread::spawn(move || pipe(c2, s2, None, Duration::ZERO, None));
            let counted = counted.clone();
            thread::spawn(move || pipe(server, client, limit, delay, Some(&counted)));
        }
    });
    Forwarder { port, from_server }
}

/// Copies `from` to `to`, each read `delay` later and counted in `count`, until either ends,
/// or until `limit` bytes have passed: then both directions of both sockets are shut.
fn pipe(
    mut from: TcpStream,
    to: TcpStream,
    limit: Option<usize>,
    delay: Duration,
    count: Option<&AtomicUsize>,
) {
    let (held, due) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    let mut writing = to.try_clone().unwrap();
    let writer = thread::spawn(move || {
        for (at, bytes) in due {
            thread::sleep(at.saturating_duration_since(Instant::now()));
            if writing.write_all(&bytes).is_err() {
                break;
            }
        }
    });
    let mut buf = [0u8; 16384];
    let mut moved = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if held
            .send((Instant::now() + delay, buf[..n].to_vec()))
            .is_err()
        {
            break;
        }
        if let Some(c) = count {
            c.fetch_add(n, Ordering::Relaxed);
        }
        moved += n;
        if limit.is_some_and(|l| moved >= l) {
            break;
        }
    }
    drop(held);
    let _ = writer.join();
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
