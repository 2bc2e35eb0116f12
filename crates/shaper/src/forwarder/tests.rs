//! Unit tests of the scheduling logic run anywhere. The end-to-end tests need root (CI has
//! it): each builds its own client/router/server namespaces named `qb-fwdtest-<pid>-<n>*`
//! with addresses from 198.18.0.0/15 only, and deletes them on drop, even on failure.

use super::*;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicU32;

fn imp(delay_ms: u64, jitter_ms: u64, reorder: bool, loss: f64) -> Impairment {
    Impairment {
        delay: Duration::from_millis(delay_ms),
        jitter: Duration::from_millis(jitter_ms),
        reorder,
        loss,
    }
}

// ---- scheduling logic -------------------------------------------------------------------

#[test]
fn fifo_due_times_never_decrease_under_jitter() {
    let mut s = Scheduler::new(imp(5, 20, false, 0.0), 1);
    let t0 = Instant::now();
    let mut last = t0;
    for i in 0..10_000u64 {
        let arrival = t0 + Duration::from_micros(i * 10);
        let slot = s.admit(arrival).expect("no loss configured");
        assert!(slot.due >= last, "packet {i} would overtake");
        assert!(slot.due >= arrival + Duration::from_millis(5));
        assert!(!slot.overtakes);
        last = slot.due;
    }
}

#[test]
fn jitter_stays_within_bounds_and_reorders_when_allowed() {
    let mut s = Scheduler::new(imp(5, 20, true, 0.0), 2);
    let t0 = Instant::now();
    let (mut overtakes, mut max_extra) = (0, Duration::ZERO);
    for i in 0..10_000u64 {
        let arrival = t0 + Duration::from_micros(i * 10);
        let slot = s.admit(arrival).expect("no loss configured");
        let extra = slot.due - arrival - Duration::from_millis(5);
        assert!(extra <= Duration::from_millis(20));
        max_extra = max_extra.max(extra);
        overtakes += u32::from(slot.overtakes);
    }
    assert!(overtakes > 1000, "only {overtakes} overtakes");
    assert!(
        max_extra > Duration::from_millis(19),
        "jitter never reached its range"
    );
}

#[test]
fn loss_fraction_matches_probability() {
    for p in [0.0, 0.01, 0.5, 1.0] {
        let mut s = Scheduler::new(imp(0, 0, false, p), 3);
        let now = Instant::now();
        let n = 100_000;
        let lost = (0..n).filter(|_| s.admit(now).is_none()).count() as f64;
        let sigma = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (lost - n as f64 * p).abs() <= 5.0 * sigma + 0.5,
            "p={p}: lost {lost} of {n}"
        );
    }
}

#[test]
fn heap_pops_earliest_first_and_fifo_in_arrival_order() {
    let t0 = Instant::now();
    let pkt = |ms: u64, seq: u64| Packet {
        buf: vec![0; SMALL_BUF],
        len: 1,
        due: t0 + Duration::from_millis(ms),
        seq,
        overtakes: false,
    };
    let mut q = Queue::new(true);
    for (i, ms) in [30, 10, 20, 10].into_iter().enumerate() {
        q.push(pkt(ms, i as u64));
    }
    let mut out = Vec::new();
    q.pop_due(t0 + Duration::from_millis(25), &mut out, 10);
    let order: Vec<u64> = out.iter().map(|p| p.seq).collect();
    assert_eq!(
        order,
        [1, 3, 2],
        "earliest due first, ties in arrival order"
    );
    assert_eq!(q.len(), 1);
    assert_eq!(q.bytes, SMALL_BUF);
    assert_eq!(q.drain_all().len(), 1);
    assert_eq!(q.bytes, 0);

    let mut q = Queue::new(false);
    q.push(pkt(10, 0));
    q.push(pkt(10, 1));
    q.push(pkt(40, 2));
    out.clear();
    q.pop_due(t0 + Duration::from_millis(10), &mut out, 10);
    assert_eq!(out.iter().map(|p| p.seq).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(q.head_due(), Some(t0 + Duration::from_millis(40)));
}

#[test]
fn wake_skew_learns_and_stays_bounded() {
    let mut w = WakeSkew::new();
    for _ in 0..100 {
        w.observe(Duration::from_micros(10));
    }
    let m = w.margin();
    assert!(
        m >= Duration::from_micros(9) && m <= Duration::from_micros(11),
        "{m:?}"
    );
    for _ in 0..100 {
        w.observe(Duration::from_millis(4));
    }
    assert_eq!(
        w.margin(),
        MAX_SPIN,
        "preemption delays must not grow the spin"
    );
}

#[test]
fn invalid_impairments_are_rejected() {
    assert!(imp(0, 0, false, 1.5).validate().is_err());
    assert!(imp(0, 0, false, -0.1).validate().is_err());
    assert!(imp(0, 0, false, f64::NAN).validate().is_err());
    assert!(Impairment {
        delay: Duration::MAX,
        ..Impairment::default()
    }
    .validate()
    .is_err());
    assert!(imp(100, 50, true, 0.3).validate().is_ok());
}

// ---- namespaces ----------------------------------------------------------------------

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

fn output(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", args[0]))
}

fn run(args: &[&str]) {
    let out = output(args);
    assert!(
        out.status.success(),
        "`{}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Moves the calling thread into a named namespace; threads it spawns inherit it.
fn enter(ns: &str) -> io::Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{ns}"))?;
    // SAFETY: setns on a valid namespace fd changes only the calling thread's namespace.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` on a fresh thread inside namespace `ns`.
fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        enter(&ns).unwrap_or_else(|e| panic!("entering {ns}: {e}"));
        f()
    })
}

struct Netns {
    name: String,
}

impl Netns {
    fn create(name: String) -> Netns {
        run(&["ip", "netns", "add", &name]);
        Netns { name }
    }

    fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", self.name.as_str()];
        v.extend_from_slice(args);
        run(&v);
    }

    fn sysctl(&self, settings: &[&str]) {
        let mut v = vec!["ip", "netns", "exec", self.name.as_str(), "sysctl", "-qw"];
        v.extend_from_slice(settings);
        run(&v);
    }

    fn exec(&self, args: &[&str]) -> Output {
        let mut v = vec!["ip", "netns", "exec", self.name.as_str()];
        v.extend_from_slice(args);
        output(&v)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stderr(Stdio::null())
            .status();
    }
}

const A_ADDR: &str = "198.18.1.2";
const B_ADDR: &str = "198.18.2.2";
const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
const A_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);

/// Client A, router R, server B; R forwards between two veth pairs. Dropping it deletes
/// all three namespaces (the fields drop in order, each deleting its own).
struct Topo {
    a: Netns,
    r: Netns,
    b: Netns,
}

static NEXT_TOPO: AtomicU32 = AtomicU32::new(0);
static SWEEP: std::sync::Once = std::sync::Once::new();

/// Deletes namespaces left by earlier test processes that were killed before their guards
/// ran (`qb-fwdtest-<pid>-...` whose pid is gone); never touches a live run's.
fn sweep_stale_namespaces() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("qb-fwdtest-")
            .and_then(|r| r.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            drop(Netns { name });
        }
    }
}

impl Topo {
    fn new() -> Topo {
        SWEEP.call_once(sweep_stale_namespaces);
        let id = NEXT_TOPO.fetch_add(1, Ordering::Relaxed);
        let base = format!("qb-fwdtest-{}-{id}", std::process::id());
        let topo = Topo {
            a: Netns::create(format!("{base}a")),
            r: Netns::create(format!("{base}r")),
            b: Netns::create(format!("{base}b")),
        };
        topo.wire();
        topo
    }

    fn names(&self) -> [String; 3] {
        [
            self.a.name.clone(),
            self.r.name.clone(),
            self.b.name.clone(),
        ]
    }

    fn wire(&self) {
        let (a, r, b) = (&self.a, &self.r, &self.b);
        for ns in [a, r, b] {
            // IPv6 chatter (DAD, router solicitations) would only add noise to counts.
            ns.sysctl(&[
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
            ns.ip(&["link", "set", "lo", "up"]);
        }
        a.ip(&[
            "link", "add", "a-r", "type", "veth", "peer", "name", "r-a", "netns", &r.name,
        ]);
        r.ip(&[
            "link", "add", "r-b", "type", "veth", "peer", "name", "b-r", "netns", &b.name,
        ]);
        a.ip(&["addr", "add", "198.18.1.2/24", "dev", "a-r"]);
        r.ip(&["addr", "add", "198.18.1.1/24", "dev", "r-a"]);
        r.ip(&["addr", "add", "198.18.2.1/24", "dev", "r-b"]);
        b.ip(&["addr", "add", "198.18.2.2/24", "dev", "b-r"]);
        for (ns, dev) in [(a, "a-r"), (r, "r-a"), (r, "r-b"), (b, "b-r")] {
            ns.ip(&["link", "set", dev, "up"]);
        }
        a.ip(&["route", "add", "default", "via", "198.18.1.1"]);
        b.ip(&["route", "add", "default", "via", "198.18.2.1"]);
        // `default` first so the TUNs created later inherit rp_filter=0: packets written
        // back into a TUN carry a source that the reverse path would put on a veth.
        r.sysctl(&[
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv4.conf.r-a.rp_filter=0",
            "net.ipv4.conf.r-b.rp_filter=0",
            "net.ipv4.ip_forward=1",
        ]);
    }

    /// Starts one forwarder per direction in R and routes each direction through its TUN.
    fn with_forwarders(&self, up: Impairment, down: Impairment) -> (Forwarder, Forwarder) {
        let fw_up = start_forwarder(&self.r.name, "fwup", up, true);
        let fw_dn = start_forwarder(&self.r.name, "fwdn", down, true);
        self.route_through_tuns(10_000);
        (fw_up, fw_dn)
    }

    /// The router side of the delay path: each direction's packets into its TUN by policy
    /// routing; written back, they arrive with iif = the TUN and use the main table.
    fn route_through_tuns(&self, txqueuelen: u32) {
        let r = &self.r;
        for (tun, from, table) in [("fwup", "r-a", "100"), ("fwdn", "r-b", "101")] {
            r.sysctl(&[
                &format!("net.ipv6.conf.{tun}.disable_ipv6=1"),
                &format!("net.ipv4.conf.{tun}.rp_filter=0"),
                &format!("net.ipv4.conf.{tun}.forwarding=1"),
            ]);
            r.ip(&["link", "set", tun, "txqueuelen", &txqueuelen.to_string()]);
            r.ip(&["link", "set", tun, "up"]);
            r.ip(&["rule", "add", "iif", from, "lookup", table]);
            r.ip(&["route", "add", "default", "dev", tun, "table", table]);
        }
    }

    fn ping(&self, args: &[&str]) -> String {
        let mut v = vec!["ping", "-n"];
        v.extend_from_slice(args);
        v.push(B_ADDR);
        String::from_utf8_lossy(&self.a.exec(&v).stdout).into_owned()
    }
}

fn start_forwarder(ns: &str, tun: &str, imp: Impairment, vnet_hdr: bool) -> Forwarder {
    let tun_name = tun.to_owned();
    in_ns(ns, move || {
        let t = Tun::open(&tun_name, vnet_hdr)?;
        Forwarder::start(t, imp)
    })
    .join()
    .expect("forwarder start thread panicked")
    .unwrap_or_else(|e| panic!("starting forwarder on {tun}: {e}"))
}

fn rtts_ms(ping_out: &str) -> Vec<f64> {
    ping_out
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next())
        .filter_map(|t| t.parse().ok())
        .collect()
}

fn received(ping_out: &str) -> Option<u32> {
    let line = ping_out
        .lines()
        .find(|l| l.contains("packets transmitted"))?;
    let field = line.split(',').find(|f| f.contains("received"))?;
    field.split_whitespace().next()?.parse().ok()
}

// ---- end to end ----------------------------------------------------------------------

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
        assert!(*rtt < 55.0, "rtt {rtt} ms far above 40 ms:\n{out}");
    }
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
        up.bytes / up.packets > 1500,
        "no GSO super-packets reached the forwarder: {up:?}"
    );
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
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
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
        up.packets < (SENDS * PER_SEND) as u64,
        "UDP GSO was segmented before the TUN: {up:?}"
    );
}

#[test]
fn stop_is_prompt_and_namespaces_go_away() {
    require_root!();
    let topo = Topo::new();
    let names = topo.names();
    let (up, dn) = topo.with_forwarders(imp(5000, 0, false, 0.0), Impairment::default());
    // Datagrams that will still be queued (due in 5 s) when we stop.
    in_ns(&topo.a.name, || {
        let sock = UdpSocket::bind(SocketAddrV4::new(A_IP, 0)).expect("bind in A");
        for i in 0u32..20 {
            sock.send_to(&i.to_be_bytes(), SocketAddrV4::new(B_IP, PORT))
                .expect("send");
        }
    })
    .join()
    .expect("sender");
    std::thread::sleep(Duration::from_millis(200));
    let running = up.stats();
    assert!(up.is_running() && dn.is_running());
    assert_eq!(running.packets, 0, "nothing is due yet: {running:?}");
    assert!(running.max_queue >= 1, "{running:?}");

    let t = Instant::now();
    let stats = up.stop();
    let idle = Instant::now();
    drop(dn);
    let (busy_stop, idle_stop) = (idle - t, idle.elapsed());
    assert!(
        busy_stop < Duration::from_millis(100),
        "stop took {busy_stop:?}"
    );
    assert!(
        idle_stop < Duration::from_millis(100),
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
