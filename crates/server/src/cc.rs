//! Congestion control for the server's senders: quinn controllers (wrapped so the window can
//! be capped and observed) and the kernel's TCP_CONGESTION.

use std::any::Any;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

pub use qbench_core::CcAlgo;
use quinn::congestion::{
    BbrConfig, Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
};

#[derive(Debug, thiserror::Error)]
pub enum CcError {
    #[error("--cc {wanted}: this kernel's TCP offers only `{available}` (net.ipv4.tcp_available_congestion_control); try `modprobe tcp_{wanted}`")]
    Unavailable { wanted: String, available: String },
    #[error("{}", not_allowed(*wanted, allowed))]
    NotAllowed { wanted: CcAlgo, allowed: String },
    #[error("setting TCP_CONGESTION to {name}: {source}")]
    Set {
        name: String,
        source: std::io::Error,
    },
}

fn sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Why a user who is not root may not have `wanted` on a TCP socket, and what they can do:
/// the `--cc` values the kernel's `allowed` list (its names) permits, root, or the sysctl.
fn not_allowed(wanted: CcAlgo, allowed: &str) -> String {
    let usable: Vec<String> = [CcAlgo::Cubic, CcAlgo::NewReno, CcAlgo::Bbr]
        .into_iter()
        .filter(|a| allowed.split_whitespace().any(|k| k == a.tcp_name()))
        .map(|a| format!("--cc {a}"))
        .collect();
    let instead = match usable.as_slice() {
        [] => String::new(),
        [one] => format!("use {one}, "),
        [rest @ .., last] => format!("use {} or {last}, ", rest.join(", ")),
    };
    format!(
        "--cc {wanted}: the kernel lets a user other than root set only `{allowed}` as a TCP \
         socket's congestion control (/proc/sys/net/ipv4/tcp_allowed_congestion_control), so \
         the server's TCP (h1, h2) cannot use {}: {instead}run as root, or as root add {} to \
         net.ipv4.tcp_allowed_congestion_control",
        wanted.tcp_name(),
        wanted.tcp_name()
    )
}

/// Fails before any traffic when the kernel cannot run `algo` for TCP.
pub fn check_tcp(algo: CcAlgo) -> Result<(), CcError> {
    let name = algo.tcp_name();
    let available = sysctl("tcp_available_congestion_control");
    if !available.split_whitespace().any(|a| a == name) {
        return Err(CcError::Unavailable {
            wanted: name.into(),
            available,
        });
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let allowed = sysctl("tcp_allowed_congestion_control");
    if !root && !allowed.split_whitespace().any(|a| a == name) {
        return Err(CcError::NotAllowed {
            wanted: algo,
            allowed,
        });
    }
    Ok(())
}

pub fn set_tcp(sock: &impl AsRawFd, algo: CcAlgo) -> Result<(), CcError> {
    let name = algo.tcp_name();
    // SAFETY: the buffer and its length describe a valid byte string for the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(CcError::Set {
            name: name.into(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Wraps a quinn controller: clamps its window to a cap (in packets of the current MTU) and
/// keeps the counters the telemetry sampler reads through `Connection::congestion_state`.
pub struct Instrumented {
    inner: Box<dyn Controller>,
    cap_packets: Option<u64>,
    mtu: u64,
    pub in_flight: u64,
    pub app_limited: bool,
    pub congestion_events: u64,
    pub persistent_congestion: u64,
}

impl Instrumented {
    pub fn cap_bytes(&self) -> Option<u64> {
        self.cap_packets.map(|p| p * self.mtu)
    }
}

impl Controller for Instrumented {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.in_flight += bytes;
        self.inner.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &quinn_proto::RttEstimator,
    ) {
        self.inner.on_ack(now, sent, bytes, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.in_flight = in_flight;
        self.app_limited = app_limited;
        self.inner
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.congestion_events += 1;
        if is_persistent_congestion {
            self.persistent_congestion += 1;
        }
        self.in_flight = self.in_flight.saturating_sub(lost_bytes);
        self.inner
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = u64::from(new_mtu);
        self.inner.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        let w = self.inner.window();
        self.cap_bytes().map_or(w, |c| w.min(c))
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = self.inner.metrics();
        m.congestion_window = self.window();
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Self {
            inner: self.inner.clone_box(),
            cap_packets: self.cap_packets,
            mtu: self.mtu,
            in_flight: self.in_flight,
            app_limited: self.app_limited,
            congestion_events: self.congestion_events,
            persistent_congestion: self.persistent_congestion,
        })
    }

    fn initial_window(&self) -> u64 {
        let w = self.inner.initial_window();
        self.cap_bytes().map_or(w, |c| w.min(c))
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

struct InstrumentedFactory {
    inner: Arc<dyn ControllerFactory + Send + Sync>,
    cap_packets: Option<u64>,
}

impl ControllerFactory for InstrumentedFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Instrumented {
            inner: self.inner.clone().build(now, current_mtu),
            cap_packets: self.cap_packets,
            mtu: u64::from(current_mtu),
            in_flight: 0,
            app_limited: false,
            congestion_events: 0,
            persistent_congestion: 0,
        })
    }
}

/// The controller factory for quinn's TransportConfig. `initial_window` is in bytes.
pub fn quic_factory(
    algo: CcAlgo,
    initial_window: Option<u64>,
    cap_packets: Option<u64>,
) -> Arc<dyn ControllerFactory + Send + Sync> {
    let inner: Arc<dyn ControllerFactory + Send + Sync> = match algo {
        CcAlgo::Cubic => {
            let mut c = CubicConfig::default();
            if let Some(w) = initial_window {
                c.initial_window(w);
            }
            Arc::new(c)
        }
        CcAlgo::NewReno => {
            let mut c = NewRenoConfig::default();
            if let Some(w) = initial_window {
                c.initial_window(w);
            }
            Arc::new(c)
        }
        CcAlgo::Bbr => {
            let mut c = BbrConfig::default();
            if let Some(w) = initial_window {
                c.initial_window(w);
            }
            Arc::new(c)
        }
    };
    Arc::new(InstrumentedFactory { inner, cap_packets })
}

/// The window a quinn controller for `algo` starts at (`initial_window` bytes if given, else
/// quinn's default), at QUIC's 1200-byte initial packets.
pub fn quic_initial_window(algo: CcAlgo, initial_window: Option<u64>) -> u64 {
    quic_factory(algo, initial_window, None)
        .build(Instant::now(), 1200)
        .initial_window()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quinn's default for its loss-based controllers: 14,720 bytes clamped to ten 1200-byte
    /// packets. BBR starts at its own.
    #[test]
    fn quinn_starts_at_twelve_thousand_bytes() {
        for algo in [CcAlgo::Cubic, CcAlgo::NewReno] {
            assert_eq!(quic_initial_window(algo, None), 12_000, "{algo:?}");
        }
        assert_eq!(quic_initial_window(CcAlgo::Cubic, Some(24_000)), 24_000);
    }

    #[test]
    fn cap_clamps_window_and_tracks_events() {
        let f = quic_factory(CcAlgo::Cubic, Some(100 * 1200), Some(10));
        let mut c = f.build(Instant::now(), 1200);
        assert_eq!(c.window(), 10 * 1200);
        assert_eq!(c.initial_window(), 10 * 1200);
        let now = Instant::now();
        c.on_mtu_update(1400);
        assert_eq!(c.window(), 10 * 1400);
        c.on_sent(now, 5000, 1);
        c.on_congestion_event(now, now, true, 1000);
        // Persistent congestion collapses the window to the minimum, under the cap.
        assert_eq!(c.window(), 2 * 1400);
        let snap = c.clone_box().into_any().downcast::<Instrumented>().unwrap();
        assert_eq!(snap.congestion_events, 1);
        assert_eq!(snap.persistent_congestion, 1);
        assert_eq!(snap.in_flight, 4000);
        // Without a cap the controller's own window shows through.
        let free = quic_factory(CcAlgo::NewReno, Some(50_000), None).build(now, 1200);
        assert_eq!(free.window(), 50_000);
    }

    #[test]
    fn kernel_names() {
        assert_eq!(CcAlgo::NewReno.tcp_name(), "reno");
        // The check agrees with the kernel's own lists, for every algorithm, whichever this
        // kernel has; a refusal names the flag and the algorithm.
        let listed = |list: &str, name: &str| sysctl(list).split_whitespace().any(|a| a == name);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        for algo in [CcAlgo::Cubic, CcAlgo::NewReno, CcAlgo::Bbr] {
            let name = algo.tcp_name();
            let usable = listed("tcp_available_congestion_control", name)
                && (root || listed("tcp_allowed_congestion_control", name));
            match check_tcp(algo) {
                Ok(()) => assert!(usable, "{name} accepted but not usable"),
                Err(e) => {
                    assert!(!usable, "{name} refused: {e}");
                    assert!(e.to_string().starts_with(&format!("--cc {name}:")), "{e}");
                }
            }
        }
    }

    #[test]
    fn a_refused_cc_names_the_flag_the_sysctl_and_what_the_user_may_do() {
        let e = CcError::NotAllowed {
            wanted: CcAlgo::Cubic,
            allowed: "reno bbr".into(),
        };
        assert_eq!(
            e.to_string(),
            "--cc cubic: the kernel lets a user other than root set only `reno bbr` as a TCP \
             socket's congestion control (/proc/sys/net/ipv4/tcp_allowed_congestion_control), \
             so the server's TCP (h1, h2) cannot use cubic: use --cc newreno or --cc bbr, run \
             as root, or as root add cubic to net.ipv4.tcp_allowed_congestion_control"
        );
        let none = not_allowed(CcAlgo::Bbr, "");
        assert!(
            none.contains("cannot use bbr: run as root, or as root add bbr"),
            "{none}"
        );
        let one = not_allowed(CcAlgo::Bbr, "reno htcp");
        assert!(one.contains("use --cc newreno, run as root"), "{one}");
    }
}
