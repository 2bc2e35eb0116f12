use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::AsyncReadExt;

use super::*;

const BURST: usize = 64 * 1024;

fn burst() -> Vec<u8> {
    (0..BURST).map(|i| (i % 251) as u8).collect()
}

/// Reads `BURST` bytes, always ready, 8 KiB at a time, from one task that wakes another after
/// each read (as h2 wakes a request whose response it has parsed); returns what was read and
/// how often the woken task had run between two reads.
async fn read_beside_a_ticker(every: Option<usize>) -> (Vec<u8>, usize) {
    let ticks = Arc::new(AtomicU64::new(0));
    let parsed = Arc::new(tokio::sync::Notify::new());
    let ticker = {
        let (ticks, parsed) = (ticks.clone(), parsed.clone());
        tokio::spawn(async move {
            for _ in 0..1000 {
                parsed.notified().await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let reader = tokio::spawn(async move {
        let data = burst();
        let mut src: Box<dyn AsyncRead + Unpin + Send> = match every {
            Some(n) => Box::new(Turns::new(io::Cursor::new(data), n)),
            None => Box::new(io::Cursor::new(data)),
        };
        let (mut out, mut moved) = (Vec::new(), 0);
        let mut last = ticks.load(Ordering::Relaxed);
        let mut buf = vec![0u8; 8192];
        loop {
            let n = src.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            parsed.notify_one();
            let now = ticks.load(Ordering::Relaxed);
            moved += usize::from(now != last);
            last = now;
        }
        (out, moved)
    });
    let got = reader.await.unwrap();
    ticker.abort();
    got
}

#[tokio::test(flavor = "current_thread")]
async fn other_tasks_run_while_a_burst_is_read() {
    let (out, moved) = read_beside_a_ticker(Some(TURN_BYTES)).await;
    assert_eq!(out, burst());
    // 64 KiB in 8 KiB reads, a turn after every 16 KiB: three turns inside the burst.
    assert_eq!(moved, BURST / TURN_BYTES - 1);
}

#[tokio::test(flavor = "current_thread")]
async fn without_turns_a_burst_is_read_in_one_go() {
    let (out, moved) = read_beside_a_ticker(None).await;
    assert_eq!(out, burst());
    assert_eq!(moved, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_byte_arrives_in_order_with_small_turns() {
    let data = burst();
    let mut src = Turns::new(io::Cursor::new(data.clone()), 1);
    let mut out = Vec::new();
    src.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, data);
}

#[tokio::test(flavor = "current_thread")]
async fn writes_pass_through() {
    use tokio::io::AsyncWriteExt;
    let mut dst = Turns::new(Vec::new(), 1);
    dst.write_all(b"request").await.unwrap();
    dst.flush().await.unwrap();
    assert_eq!(dst.inner, b"request");
}

#[test]
fn a_connection_alone_on_its_thread_turns_every_16_kib_and_a_shared_one_less_often() {
    assert_eq!(turn_bytes(0), TURN_BYTES);
    assert_eq!(turn_bytes(1), TURN_BYTES);
    assert_eq!(turn_bytes(64), 64 * TURN_BYTES);
    assert_eq!(turn_bytes(usize::MAX), usize::MAX);
}
