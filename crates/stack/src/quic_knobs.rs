//! `--quic` settings as quinn takes them, for both ends (the client uses these too), and
//! quinn's counters as a `QuicStats`.

use std::os::fd::AsRawFd;

use qbench_core::spec::quic_knobs::{QuicKnobs, QuicStats};

/// Sets what `k` names on a connection's transport configuration.
pub fn apply(t: &mut quinn::TransportConfig, k: &QuicKnobs) {
    if let Some(n) = k.ack_frequency {
        let mut a = quinn::AckFrequencyConfig::default();
        // quinn counts the packets a receiver may take without acknowledging at once.
        a.ack_eliciting_threshold(quinn::VarInt::from_u32(n.saturating_sub(1)));
        a.max_ack_delay(k.ack_delay);
        // quinn's default here (2) would also change how reordering is acknowledged; 1 keeps
        // the stack's own: an out-of-order packet is acknowledged at once.
        a.reordering_threshold(quinn::VarInt::from_u32(1));
        t.ack_frequency_config(Some(a));
    }
    if let Some(on) = k.gso {
        t.enable_segmentation_offload(on);
    }
    if k.mtu_discovery == Some(false) {
        t.mtu_discovery_config(None);
    } else if let Some(m) = k.max_udp_payload {
        let mut d = quinn::MtuDiscoveryConfig::default();
        d.upper_bound(m);
        t.mtu_discovery_config(Some(d));
    }
    if let Some(m) = k.initial_mtu {
        t.initial_mtu(m);
    }
    if let Some(r) = k.initial_rtt {
        t.initial_rtt(r);
    }
    if let Some(w) = k.send_window {
        t.send_window(w.0);
    }
}

/// The endpoint-wide part: the largest UDP payload this end accepts.
pub fn endpoint_config(k: &QuicKnobs) -> quinn::EndpointConfig {
    let mut c = quinn::EndpointConfig::default();
    if let Some(m) = k.max_udp_payload {
        // The parser keeps it within 1200..=65527, where quinn takes it.
        let _ = c.max_udp_payload_size(m);
    }
    c
}

/// `gro=off`: quinn-udp turns UDP_GRO on when it wraps a socket; this turns it off again on
/// the same socket, after the endpoint has taken it.
pub fn set_gro(sock: &impl AsRawFd, on: bool) -> std::io::Result<()> {
    let v: libc::c_int = on.into();
    let rc = crate::sockopt::set(sock, libc::SOL_UDP, libc::UDP_GRO, &v);
    match rc {
        // A kernel without UDP GRO has it off already.
        Err(e) if !on && e.raw_os_error() == Some(libc::ENOPROTOOPT) => Ok(()),
        other => other,
    }
}

/// Reads UDP_GRO back (tests show `gro=off` reached the kernel).
pub fn gro_enabled(sock: &impl AsRawFd) -> std::io::Result<bool> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_GRO,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(v != 0)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// quinn's counters of a connection so far, and whether its socket has GRO on.
pub fn stats(conn: &quinn::Connection, sock: Option<&std::net::UdpSocket>) -> QuicStats {
    let s = conn.stats();
    QuicStats {
        tx_datagrams: s.udp_tx.datagrams,
        tx_calls: s.udp_tx.ios,
        rx_datagrams: s.udp_rx.datagrams,
        gro: sock.and_then(|s| gro_enabled(s).ok()),
        acks_sent: s.frame_tx.acks,
        acks_received: s.frame_rx.acks,
        ack_frequency_sent: s.frame_tx.ack_frequency,
        ack_frequency_received: s.frame_rx.ack_frequency,
        mtu: s.path.current_mtu,
        rtt_us: s.path.rtt.as_micros() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quinn keeps these settings private; its Debug form is where they show.
    #[test]
    fn every_setting_reaches_quinns_transport_config() {
        let mut t = quinn::TransportConfig::default();
        let k: QuicKnobs = "ack-frequency=10,ack-delay=5ms,gso=off,max-udp-payload=9000,\
                            initial-mtu=1300,initial-rtt=50ms,send-window=7MB"
            .parse()
            .unwrap();
        apply(&mut t, &k);
        let d = format!("{t:?}");
        for want in [
            "ack_eliciting_threshold: 9",
            "reordering_threshold: 1",
            "max_ack_delay: Some(5ms)",
            "enable_segmentation_offload: false",
            "upper_bound: 9000",
            "initial_mtu: 1300",
            "initial_rtt: 50ms",
            "send_window: 7000000",
        ] {
            assert!(d.contains(want), "{want} not in {d}");
        }
        let mut t = quinn::TransportConfig::default();
        apply(&mut t, &"mtu-discovery=off".parse().unwrap());
        assert!(format!("{t:?}").contains("mtu_discovery_config: None"));
        let e = format!(
            "{:?}",
            endpoint_config(&"max-udp-payload=9000".parse().unwrap())
        );
        assert!(e.contains("max_udp_payload_size: 9000"), "{e}");
    }

    #[test]
    fn gro_off_reaches_the_socket() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_gro(&s, true).unwrap();
        assert!(gro_enabled(&s).unwrap());
        set_gro(&s, false).unwrap();
        assert!(!gro_enabled(&s).unwrap());
    }
}
