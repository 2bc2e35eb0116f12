//! End-to-end tests through real TUNs in network namespaces (see `tests_netns`). They need
//! root (CI has it) and skip without it; the throughput measurement at the end is run by hand.

use std::net::{SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};

use super::tests::imp;
use super::tests_netns::*;
use super::*;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Skips a root-only test on a developer machine without root; CI runs as root.
macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!("skipped: needs root for network namespaces and /dev/net/tun");
            return;
        }
    };
}

#[test]
fn tun_opens_with_offloads() {
    require_root!();
    let topo = Topo::new();
    let (with, without) = in_ns(&topo.r.name, || {
        (Tun::open("fwup", true), Tun::open("fwdn", false))
    })
    .join()
    .expect("thread");
    let (with, without) = (
        with.expect("open with vnet_hdr"),
        without.expect("open without"),
    );
    assert_eq!(with.name(), "fwup");
    assert!(with.offloads(), "this kernel should take TUNSETOFFLOAD");
    assert_ne!(with.offload_flags() & crate::tun::TUN_F_TSO4, 0);
    assert_eq!(with.vnet_hdr_len(), crate::tun::VNET_HDR_LEN);
    assert!(!without.offloads());
    assert_eq!(without.vnet_hdr_len(), 0);
}

#[test]
fn ping_rtt_includes_both_delays() {
    require_root!();
    let topo = Topo::new();
    let d = imp(20, 0, false, 0.0);
    let (up, dn) = topo.with_forwarders(d, d);
    let out = topo.ping(&["-c", "5", "-i", "0.2", "-W", "2"]);
    let rtts = rtts_ms(&out);
    assert_eq!(rtts.len(), 5, "expected 5 replies:\n{out}");
    for rtt in &rtts {
        assert!(
            *rtt >= 40.0,
            "rtt {rtt} ms below the 2 x 20 ms configured:\n{out}"
        );
    }
    // Above the delay, the median is judged: one echo can catch a descheduled forwarder.
    let mut sorted = rtts.clone();
    sorted.sort_by(f64::total_cmp);
    assert!(
        sorted[2] < 55.0,
        "median rtt {} ms far above 40 ms:\n{out}",
        sorted[2]
    );
    let (up, dn) = (up.stop(), dn.stop());
    assert!(up.packets >= 5 && dn.packets >= 5, "up {up:?} down {dn:?}");
    assert!(up.bytes >= 5 * 84, "ICMP echo of 84 bytes each: {up:?}");
    assert_eq!(up.dropped + dn.dropped, 0);
}

/// The real topology creates the TUNs with `ip tuntap add ... vnet_hdr` before the
/// forwarders attach; opening by name must attach to them and set offloads.
#[test]
fn attaches_to_persistent_tuns() {
    require_root!();
    let topo = Topo::new();
    for tun in ["fwup", "fwdn"] {
        topo.r
            .ip(&["tuntap", "add", "dev", tun, "mode", "tun", "vnet_hdr"]);
    }
    let d = imp(5, 0, false, 0.0);
    let (up, dn) = topo.with_forwarders(d, d);
    let out = topo.ping(&["-c", "3", "-i", "0.2", "-W", "2"]);
    let rtts = rtts_ms(&out);
    assert_eq!(rtts.len(), 3, "expected 3 replies:\n{out}");
    assert!(rtts.iter().all(|&r| r >= 10.0), "{out}");
    assert!(up.stop().packets >= 3 && dn.stop().packets >= 3);
}

#[test]
fn loss_is_binomial() {
    require_root!();
    let topo = Topo::new();
    let (up, dn) = topo.with_forwarders(imp(0, 0, false, 0.5), Impairment::default());
    let n = 200u32;
    let out = topo.ping(&["-c", &n.to_string(), "-i", "0.01", "-W", "1"]);
    let got = received(&out).unwrap_or_else(|| panic!("no ping summary:\n{out}"));
    let lost = f64::from(n - got) / f64::from(n);
    let sigma = (0.25 / f64::from(n)).sqrt();
    assert!(
        (lost - 0.5).abs() <= 4.0 * sigma,
        "lost {lost} of {n} at p=0.5:\n{out}"
    );
    let (up, dn) = (up.stop(), dn.stop());
    assert_eq!(
        up.packets + up.dropped,
        u64::from(n),
        "every request passes or is dropped once: {up:?}"
    );
    assert_eq!(dn.packets, u64::from(got), "{dn:?}");
    assert_eq!(dn.dropped, 0);
}

const PORT: u16 = 40_000;

/// Sends `n` numbered datagrams from A to B, 200 µs apart; returns the numbers in the order
/// B received them (waiting up to 2 s of silence).
fn udp_sequence(topo: &Topo, n: u32) -> Vec<u32> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = in_ns(&topo.b.name, move || {
        let sock = UdpSocket::bind(SocketAddrV4::new(B_IP, PORT)).expect("bind in B");
        sock.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let _ = ready_tx.send(());
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while got.len() < n as usize {
            match sock.recv(&mut buf) {
                Ok(4) => got.push(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]])),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        got
    });
    ready_rx.recv().expect("receiver bound");
    in_ns(&topo.a.name, move || {
        let sock = UdpSocket::bind(SocketAddrV4::new(A_IP, 0)).expect("bind in A");
        for i in 0..n {
            sock.send_to(&i.to_be_bytes(), SocketAddrV4::new(B_IP, PORT))
                .expect("send");
            std::thread::sleep(Duration::from_micros(200));
        }
    })
    .join()
    .expect("sender");
    receiver.join().expect("receiver")
}

fn in_order(seq: &[u32]) -> bool {
    seq.windows(2).all(|w| w[0] < w[1])
}

#[test]
fn jitter_reorders_only_when_allowed() {
    require_root!();
    let n = 200;
    for reorder in [true, false] {
        let topo = Topo::new();
        let (up, _dn) = topo.with_forwarders(imp(1, 20, reorder, 0.0), imp(1, 0, false, 0.0));
        // Resolves ARP on both hops first so no datagram waits in a neighbour queue.
        assert_eq!(received(&topo.ping(&["-c", "1", "-W", "2"])), Some(1));
        let seq = udp_sequence(&topo, n);
        let mut sorted = seq.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..n).collect::<Vec<_>>(),
            "reorder={reorder}: lost or duplicated datagrams"
        );
        let stats = up.stop();
        if reorder {
            assert!(
                !in_order(&seq),
                "jitter 20 ms with reorder=true left 200 datagrams in order"
            );
            assert!(stats.reordered > 0, "{stats:?}");
        } else {
            assert!(
                in_order(&seq),
                "reorder=false must keep arrival order: {seq:?}"
            );
            assert_eq!(stats.reordered, 0);
        }
    }
}

/// A TCP bulk transfer arrives intact, and the forwarder saw GSO super-packets: the vnet
/// header (segmentation and checksum offload state) survived the round trip.
#[test]
fn tcp_super_packets_pass_intact() {
    require_root!();
    let topo = Topo::new();
    let (up, _dn) = topo.with_forwarders(imp(5, 0, false, 0.0), imp(5, 0, false, 0.0));
    const LEN: usize = 32 << 20;
    let pattern = |i: usize| (i % 251) as u8;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = in_ns(&topo.b.name, move || -> io::Result<usize> {
        let l = std::net::TcpListener::bind(SocketAddrV4::new(B_IP, PORT))?;
        let _ = ready_tx.send(());
        let (mut c, _) = l.accept()?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        let (mut buf, mut total) = (vec![0u8; 1 << 16], 0usize);
        loop {
            let n = io::Read::read(&mut c, &mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            if let Some(bad) = (0..n).find(|&i| buf[i] != pattern(total + i)) {
                return Err(invalid(format!("corrupt byte at offset {}", total + bad)));
            }
            total += n;
        }
    });
    ready_rx.recv().expect("listener bound");
    let data: Vec<u8> = (0..LEN).map(pattern).collect();
    in_ns(&topo.a.name, move || -> io::Result<()> {
        let mut c = std::net::TcpStream::connect_timeout(
            &SocketAddrV4::new(B_IP, PORT).into(),
            Duration::from_secs(2),
        )?;
        c.set_write_timeout(Some(Duration::from_secs(5)))?;
        io::Write::write_all(&mut c, &data)?;
        c.shutdown(std::net::Shutdown::Write)
    })
    .join()
    .expect("client thread")
    .expect("client");
    assert_eq!(server.join().expect("server thread").expect("server"), LEN);
    let up = up.stop();
    assert!(up.bytes >= LEN as u64, "{up:?}");
    assert!(
        up.bytes / up.writes > 1500,
        "no GSO super-packets reached the forwarder: {up:?}"
    );
    // Counted as the segments they carry: at most 1460 payload bytes each.
    assert!(up.packets >= LEN as u64 / 1460, "{up:?}");
}

/// UDP GSO (as QUIC stacks send) passes as super-packets and arrives as the datagrams sent.
#[test]
fn udp_gso_super_packets_pass_intact() {
    require_root!();
    let topo = Topo::new();
    let (up, _dn) = topo.with_forwarders(imp(1, 0, false, 0.0), imp(1, 0, false, 0.0));
    assert_eq!(received(&topo.ping(&["-c", "1", "-W", "2"])), Some(1));
    const SEG: usize = 1000;
    const SENDS: usize = 16;
    const PER_SEND: usize = 16;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = in_ns(&topo.b.name, move || {
        let sock = UdpSocket::bind(SocketAddrV4::new(B_IP, PORT)).expect("bind in B");
        sock.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let _ = ready_tx.send(());
        let mut sizes = Vec::new();
        let mut buf = [0u8; 65536];
        while let Ok(n) = sock.recv(&mut buf) {
            sizes.push(n);
            if sizes.len() == SENDS * PER_SEND {
                break;
            }
        }
        sizes
    });
    ready_rx.recv().expect("receiver bound");
    in_ns(&topo.a.name, move || {
        let sock = UdpSocket::bind(SocketAddrV4::new(A_IP, 0)).expect("bind in A");
        let seg = SEG as libc::c_int;
        // SAFETY: setsockopt reads one c_int through the live pointer.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                (&seg as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "UDP_SEGMENT: {}", io::Error::last_os_error());
        for _ in 0..SENDS {
            sock.send_to(&[7u8; SEG * PER_SEND], SocketAddrV4::new(B_IP, PORT))
                .expect("send");
            std::thread::sleep(Duration::from_millis(1));
        }
    })
    .join()
    .expect("sender");
    let sizes = receiver.join().expect("receiver");
    assert_eq!(sizes.len(), SENDS * PER_SEND, "datagrams lost");
    assert!(
        sizes.iter().all(|&n| n == SEG),
        "datagrams resized: {sizes:?}"
    );
    let up = up.stop();
    assert!(
        up.writes < (SENDS * PER_SEND) as u64,
        "UDP GSO was segmented before the TUN: {up:?}"
    );
    // Each datagram counts once; the ping before them is the only other packet up.
    let datagrams = (SENDS * PER_SEND) as u64;
    assert!((datagrams..=datagrams + 1).contains(&up.packets), "{up:?}");
}

#[test]
fn stop_is_prompt_and_namespaces_go_away() {
    require_root!();
    let topo = Topo::new();
    let names = topo.names();
    let (up, dn) = topo.with_forwarders(imp(5000, 0, false, 0.0), Impairment::default());
    // Datagrams from A that will still be queued (due in 5 s) when we stop; those from B
    // pass at once and show that the idle forwarder was working before it is stopped.
    for (ns, from, to) in [(&topo.a.name, A_IP, B_IP), (&topo.b.name, B_IP, A_IP)] {
        in_ns(ns, move || {
            let sock = UdpSocket::bind(SocketAddrV4::new(from, 0)).expect("bind");
            for i in 0u32..20 {
                sock.send_to(&i.to_be_bytes(), SocketAddrV4::new(to, PORT))
                    .expect("send");
            }
        })
        .join()
        .expect("sender");
    }
    // Waited for, not slept on: a starved forwarder thread takes its time. 3 s stays well
    // inside the 5 s that A's datagrams are held.
    let sent = Instant::now();
    while (dn.stats().packets == 0 || up.stats().max_queue == 0)
        && sent.elapsed() < Duration::from_secs(3)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let running = up.stats();
    assert_eq!(running.packets, 0, "nothing is due yet: {running:?}");
    assert!(running.max_queue >= 1, "{running:?}");
    let down = dn.stats();
    assert!(
        down.packets >= 1,
        "B's datagrams passed the idle direction: {down:?}"
    );

    let t = Instant::now();
    let stats = up.stop();
    let idle = Instant::now();
    drop(dn);
    // Prompt means not waiting for the 5 s the queued datagrams are held: 2 s leaves a
    // starved thread's join room and still tells the two apart.
    let (busy_stop, idle_stop) = (idle - t, idle.elapsed());
    assert!(
        busy_stop < Duration::from_secs(2),
        "stop took {busy_stop:?}"
    );
    assert!(
        idle_stop < Duration::from_secs(2),
        "idle stop took {idle_stop:?}"
    );
    assert_eq!(stats.packets, 0);
    assert!(
        stats.dropped >= 1,
        "queued packets count as dropped on stop: {stats:?}"
    );

    drop(topo);
    for n in names {
        assert!(
            !std::path::Path::new(&format!("/run/netns/{n}")).exists(),
            "{n} left behind"
        );
    }
}

// ---- measurement ---------------------------------------------------------------------

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) so far of this process's threads whose name starts with
/// `prefix`, from /proc/self/task/*/stat.
fn thread_cpu_secs(prefix: &str) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut ticks = 0u64;
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        ticks += f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    ticks as f64 / hz
}

/// Throughput of one iperf3 TCP stream A -> B through both forwarders. Not a pass/fail
/// test; run by hand:
///
/// ```sh
/// cargo test -p qbench-shaper --release --lib -- --ignored --nocapture throughput
/// ```
///
/// Knobs (environment): QB_TP_DELAYS (ms per direction, comma-separated; "0,10"),
/// QB_TP_SECS (5), QB_TP_VNET (1 = vnet_hdr + offloads, 0 = plain 1500-byte packets),
/// QB_TP_REVERSE (1 = iperf3 -R), QB_TP_RATE (iperf3 -b, e.g. 1G), QB_TP_TXQLEN (10000),
/// QB_TP_BYPASS (1 = plain kernel routing, forwarders idle: the baseline),
/// QB_TP_LINKSTATS (1 = print interface, TCP and softnet counters), QB_TP_DEFAULT_BUFS
/// (1 = keep the kernel's default tcp_rmem/tcp_wmem in A and B instead of 32 MiB maxima).
#[test]
#[ignore = "measurement, run by hand with --ignored --nocapture"]
fn throughput_iperf3() {
    require_root!();
    let delays: Vec<u64> = std::env::var("QB_TP_DELAYS")
        .unwrap_or_else(|_| "0,10".into())
        .split(',')
        .filter_map(|d| d.trim().parse().ok())
        .collect();
    for delay in delays {
        measure_one(delay);
    }
}

fn measure_one(delay_ms: u64) {
    let secs: u32 = env_or("QB_TP_SECS", 5);
    let vnet = env_or("QB_TP_VNET", 1) == 1;
    let reverse = env_or("QB_TP_REVERSE", 0) == 1;
    let bypass = env_or("QB_TP_BYPASS", 0) == 1;
    let topo = Topo::new();
    for ns in [&topo.a, &topo.b] {
        if env_or("QB_TP_DEFAULT_BUFS", 0) == 1 {
            break;
        }
        // A 20 ms RTT at several Gbit/s needs more than the default 6 MiB receive window.
        ns.sysctl(&[
            "net.ipv4.tcp_rmem=4096 131072 33554432",
            "net.ipv4.tcp_wmem=4096 16384 33554432",
        ]);
    }
    let d = imp(delay_ms, 0, false, 0.0);
    let up = start_forwarder(&topo.r.name, "fwup", d, vnet);
    let dn = start_forwarder(&topo.r.name, "fwdn", d, vnet);
    if !bypass {
        topo.route_through_tuns(env_or("QB_TP_TXQLEN", 10_000));
    }
    assert_eq!(
        received(&topo.ping(&["-c", "1", "-W", "2"])),
        Some(1),
        "path is up"
    );

    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &topo.b.name,
            "iperf3",
            "-s",
            "-1",
            "-B",
            B_ADDR,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    std::thread::sleep(Duration::from_millis(500));
    let cpu0 = thread_cpu_secs("fwd-");
    let t0 = Instant::now();
    let secs_s = secs.to_string();
    let mut client = vec!["iperf3", "-c", B_ADDR, "-B", A_ADDR, "-t", &secs_s, "-J"];
    if reverse {
        client.push("-R");
    }
    let rate = std::env::var("QB_TP_RATE").unwrap_or_default();
    if !rate.is_empty() {
        client.extend(["-b", rate.as_str()]);
    }
    let out = topo.a.exec(&client);
    let wall = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_secs("fwd-") - cpu0;
    if env_or("QB_TP_LINKSTATS", 0) == 1 {
        for ns in [&topo.a, &topo.r, &topo.b] {
            println!(
                "{}",
                String::from_utf8_lossy(&ns.exec(&["ip", "-s", "link"]).stdout)
            );
        }
        println!(
            "A: {}",
            String::from_utf8_lossy(&topo.a.exec(&["nstat", "-a"]).stdout)
        );
        println!(
            "{}",
            std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default()
        );
        println!(
            "B: {}",
            String::from_utf8_lossy(&topo.b.exec(&["nstat", "-a"]).stdout)
        );
    }
    let _ = server.kill();
    let _ = server.wait();
    let (up, dn) = (up.stop(), dn.stop());

    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let gbps = json["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e9;
    let retr = json["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    let rtt_us = json["end"]["streams"][0]["sender"]["mean_rtt"]
        .as_u64()
        .unwrap_or(0);
    println!(
        "delay {delay_ms} ms/dir, vnet_hdr {vnet}, reverse {reverse}: {gbps:.2} Gbit/s, {retr} retransmits, mean rtt {rtt_us} us"
    );
    for (dir, s) in [("up", &up), ("down", &dn)] {
        println!(
            "  {dir:4}: {} pkts ({:.0}/s), {} MB, avg {} B/pkt, dropped {}, max_queue {}",
            s.packets,
            s.packets as f64 / wall,
            s.bytes / 1_000_000,
            s.bytes.checked_div(s.packets).unwrap_or(0),
            s.dropped,
            s.max_queue
        );
    }
    println!("  forwarder threads: {cpu:.2} CPU-s over {wall:.1} s wall");
    if gbps == 0.0 {
        println!("  iperf3 said: {}", String::from_utf8_lossy(&out.stderr));
    }
}
