//! `--quic KEY=VALUE,...`: the QUIC settings that decide its speed at high rates, set on both
//! ends of a run (the in-process server's and the client's quinn), and what the stack did
//! with them (`QuicStats`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::units::ByteSize;

/// Smallest UDP payload QUIC allows (RFC 9000 14).
pub const MIN_UDP_PAYLOAD: u16 = 1200;
/// Largest UDP payload over IPv4 (65535 - 8 - 20).
pub const MAX_UDP_PAYLOAD: u16 = 65527;
/// The UDP payload quinn accepts unless told otherwise (Ethernet's 1500 less IP and UDP).
pub const DEFAULT_MAX_UDP_PAYLOAD: u16 = 1472;
/// `rcvbuf`'s range: the kernel's own floor is about 4.6 KB granted, and the size it grants
/// (twice the one asked) must fit a C int.
pub const MIN_RCVBUF: u64 = 4 << 10;
pub const MAX_RCVBUF: u64 = 1 << 30;
/// Most ack-eliciting packets `ack-frequency` lets a receiver take per ACK.
pub const MAX_ACK_FREQUENCY: u32 = 1000;

/// Settings of both ends' QUIC stacks; `None` keeps the stack's own.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct QuicKnobs {
    /// Ask the peer for one ACK per this many ack-eliciting packets (the ACK frequency
    /// extension; quinn's `ack_eliciting_threshold` is this minus one). QUIC's own is 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_frequency: Option<u32>,
    /// With `ack_frequency`: the longest the peer may wait before an ACK (quinn clamps it
    /// to at most the larger of the RTT and 25 ms).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_us",
        rename = "ack_delay_us"
    )]
    #[schemars(with = "Option<u64>")]
    pub ack_delay: Option<Duration>,
    /// Send batches of datagrams in one system call (UDP GSO); quinn's default is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso: Option<bool>,
    /// Let the kernel hand over batches of received datagrams at once (UDP GRO); on by
    /// default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gro: Option<bool>,
    /// Probe for a larger path MTU (DPLPMTUD); on by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu_discovery: Option<bool>,
    /// The largest UDP payload each end accepts and probes up to (default: 1472 accepted,
    /// 1452 probed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_udp_payload: Option<u16>,
    /// The UDP payload size a connection starts with (default 1200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_mtu: Option<u16>,
    /// The RTT assumed before the first sample (quinn's default 333 ms).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_us",
        rename = "initial_rtt_us"
    )]
    #[schemars(with = "Option<u64>")]
    pub initial_rtt: Option<Duration>,
    /// Bytes a connection may have sent and not yet acknowledged, over all its streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_window: Option<ByteSize>,
    /// The receive buffer each end's UDP sockets ask for (`SO_RCVBUF`; as root forced past
    /// `net.core.rmem_max`, which a network namespace here cannot change): 4 MiB where the
    /// kernel allows it otherwise. The kernel grants twice it, for its own bookkeeping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<ByteSize>,
    /// The send buffer each end's UDP sockets ask for (`SO_SNDBUF`; as root forced past
    /// `net.core.wmem_max`); quinn's own where not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf: Option<ByteSize>,
}

mod opt_us {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_micros() as u64)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_micros))
    }
}

/// Why a `--quic` value was refused; the text names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KnobError(String);

fn err(key: &str, why: impl fmt::Display) -> KnobError {
    KnobError(format!("`{key}`: {why}"))
}

const KEYS: &str = "ack-frequency, ack-delay, gso, gro, mtu-discovery, max-udp-payload, \
                    initial-mtu, initial-rtt, send-window, rcvbuf, sndbuf";

fn on_off(key: &str, v: &str) -> Result<bool, KnobError> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(err(key, format!("`{v}`: on or off"))),
    }
}

fn duration(key: &str, v: &str, min: Duration, max: Duration) -> Result<Duration, KnobError> {
    let d = humantime::parse_duration(v).map_err(|e| err(key, format!("`{v}`: {e}")))?;
    // Reports keep microseconds: a finer value would not be the one a rerun sets.
    if d.subsec_nanos() % 1000 != 0 {
        return Err(err(key, format!("`{v}`: whole microseconds")));
    }
    if d < min || d > max {
        return Err(err(
            key,
            format!(
                "`{v}`: from {} to {}",
                humantime::format_duration(min),
                humantime::format_duration(max)
            ),
        ));
    }
    Ok(d)
}

fn payload(key: &str, v: &str) -> Result<u16, KnobError> {
    match v.parse::<u16>() {
        Ok(n) if (MIN_UDP_PAYLOAD..=MAX_UDP_PAYLOAD).contains(&n) => Ok(n),
        _ => Err(err(
            key,
            format!("`{v}`: bytes from {MIN_UDP_PAYLOAD} to {MAX_UDP_PAYLOAD}"),
        )),
    }
}

impl QuicKnobs {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `self` with every key `over` sets replaced by its value (a scenario axis over its
    /// base).
    pub fn overlaid(&self, over: &Self) -> Self {
        Self {
            ack_frequency: over.ack_frequency.or(self.ack_frequency),
            ack_delay: over.ack_delay.or(self.ack_delay),
            gso: over.gso.or(self.gso),
            gro: over.gro.or(self.gro),
            mtu_discovery: over.mtu_discovery.or(self.mtu_discovery),
            max_udp_payload: over.max_udp_payload.or(self.max_udp_payload),
            initial_mtu: over.initial_mtu.or(self.initial_mtu),
            initial_rtt: over.initial_rtt.or(self.initial_rtt),
            send_window: over.send_window.or(self.send_window),
            rcvbuf: over.rcvbuf.or(self.rcvbuf),
            sndbuf: over.sndbuf.or(self.sndbuf),
        }
    }

    /// Settings that only make sense together.
    pub fn check(&self) -> Result<(), KnobError> {
        if self.ack_delay.is_some() && self.ack_frequency.is_none() {
            return Err(err(
                "ack-delay",
                "is part of the ACK frequency request: give ack-frequency too",
            ));
        }
        if let Some(i) = self.initial_mtu {
            let m = self.max_udp_payload.unwrap_or(DEFAULT_MAX_UDP_PAYLOAD);
            if i > m {
                return Err(err(
                    "initial-mtu",
                    format!("{i} is above max-udp-payload {m} (raise that too)"),
                ));
            }
        }
        Ok(())
    }
}

impl FromStr for QuicKnobs {
    type Err = KnobError;

    /// `ack-frequency=10,gso=off`; an empty string or `stock` sets nothing. A key given twice
    /// is an error, not a silent override.
    fn from_str(s: &str) -> Result<Self, KnobError> {
        let k = Self::parse_keys(s)?;
        k.check()?;
        Ok(k)
    }
}

impl QuicKnobs {
    /// The keys of `s`, without checking how they go together (a scenario's base is checked
    /// once its axis value is over it).
    pub fn parse_keys(s: &str) -> Result<Self, KnobError> {
        let mut k = Self::default();
        if s.trim() == "stock" {
            return Ok(k);
        }
        let mut seen: Vec<&str> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, v) = item
                .split_once('=')
                .map(|(a, b)| (a.trim(), b.trim()))
                .ok_or_else(|| {
                    KnobError(format!("`{item}`: KEY=VALUE, where KEY is one of {KEYS}"))
                })?;
            if seen.contains(&key) {
                return Err(err(key, "given twice"));
            }
            seen.push(key);
            match key {
                "ack-frequency" => {
                    k.ack_frequency = Some(match v.parse::<u32>() {
                        Ok(n) if (1..=MAX_ACK_FREQUENCY).contains(&n) => n,
                        _ => {
                            return Err(err(
                                key,
                                format!("`{v}`: packets per ACK, 1 to {MAX_ACK_FREQUENCY}"),
                            ))
                        }
                    })
                }
                "ack-delay" => {
                    k.ack_delay = Some(duration(
                        key,
                        v,
                        Duration::from_micros(100),
                        Duration::from_secs(1),
                    )?)
                }
                "gso" => k.gso = Some(on_off(key, v)?),
                "gro" => k.gro = Some(on_off(key, v)?),
                "mtu-discovery" => k.mtu_discovery = Some(on_off(key, v)?),
                "max-udp-payload" => k.max_udp_payload = Some(payload(key, v)?),
                "initial-mtu" => k.initial_mtu = Some(payload(key, v)?),
                "initial-rtt" => {
                    k.initial_rtt = Some(duration(
                        key,
                        v,
                        Duration::from_micros(100),
                        Duration::from_secs(10),
                    )?)
                }
                "send-window" => {
                    let b: ByteSize = v.parse().map_err(|e| err(key, e))?;
                    if b.0 < 1 << 10 || b.0 > 1 << 40 {
                        return Err(err(key, format!("`{v}`: from 1KiB to 1TiB")));
                    }
                    k.send_window = Some(b);
                }
                "rcvbuf" | "sndbuf" => {
                    let b: ByteSize = v.parse().map_err(|e| err(key, e))?;
                    if b.0 < MIN_RCVBUF || b.0 > MAX_RCVBUF {
                        return Err(err(key, format!("`{v}`: from 4KiB to 1GiB")));
                    }
                    match key {
                        "rcvbuf" => k.rcvbuf = Some(b),
                        _ => k.sndbuf = Some(b),
                    }
                }
                other => {
                    return Err(KnobError(format!(
                        "`{other}`: unknown setting; one of {KEYS}"
                    )))
                }
            }
        }
        Ok(k)
    }
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

impl fmt::Display for QuicKnobs {
    /// The `--quic` form, keys in a fixed order, so that parsing it gives `self` back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let d = |d: Duration| humantime::format_duration(d).to_string().replace(' ', "");
        if let Some(n) = self.ack_frequency {
            parts.push(format!("ack-frequency={n}"));
        }
        if let Some(v) = self.ack_delay {
            parts.push(format!("ack-delay={}", d(v)));
        }
        if let Some(v) = self.gso {
            parts.push(format!("gso={}", onoff(v)));
        }
        if let Some(v) = self.gro {
            parts.push(format!("gro={}", onoff(v)));
        }
        if let Some(v) = self.mtu_discovery {
            parts.push(format!("mtu-discovery={}", onoff(v)));
        }
        if let Some(v) = self.max_udp_payload {
            parts.push(format!("max-udp-payload={v}"));
        }
        if let Some(v) = self.initial_mtu {
            parts.push(format!("initial-mtu={v}"));
        }
        if let Some(v) = self.initial_rtt {
            parts.push(format!("initial-rtt={}", d(v)));
        }
        if let Some(v) = self.send_window {
            parts.push(format!("send-window={v}"));
        }
        if let Some(v) = self.rcvbuf {
            parts.push(format!("rcvbuf={v}"));
        }
        if let Some(v) = self.sndbuf {
            parts.push(format!("sndbuf={v}"));
        }
        f.write_str(&parts.join(","))
    }
}

/// What one QUIC connection's stack did over a run, as its own counters say: where each
/// `--quic` setting shows.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct QuicStats {
    /// UDP datagrams sent, and the system calls that sent them (fewer with GSO).
    pub tx_datagrams: u64,
    pub tx_calls: u64,
    /// UDP datagrams received.
    pub rx_datagrams: u64,
    /// Whether the socket had UDP GRO on when the run ended (quinn counts packets, not
    /// reads, so GRO shows here rather than in a count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gro: Option<bool>,
    /// ACK frames sent and received.
    pub acks_sent: u64,
    pub acks_received: u64,
    /// ACK_FREQUENCY frames sent (asking the peer to acknowledge less often) and received.
    pub ack_frequency_sent: u64,
    pub ack_frequency_received: u64,
    /// The path's UDP payload size when the run ended (MTU discovery raises it).
    pub mtu: u16,
    /// The RTT estimate when the run ended, in microseconds.
    pub rtt_us: u64,
}

impl QuicStats {
    /// Counters of `self` since `earlier` (both from the same connection); the MTU and RTT
    /// are the latest.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            tx_datagrams: self.tx_datagrams.saturating_sub(earlier.tx_datagrams),
            tx_calls: self.tx_calls.saturating_sub(earlier.tx_calls),
            rx_datagrams: self.rx_datagrams.saturating_sub(earlier.rx_datagrams),
            gro: self.gro,
            acks_sent: self.acks_sent.saturating_sub(earlier.acks_sent),
            acks_received: self.acks_received.saturating_sub(earlier.acks_received),
            ack_frequency_sent: self
                .ack_frequency_sent
                .saturating_sub(earlier.ack_frequency_sent),
            ack_frequency_received: self
                .ack_frequency_received
                .saturating_sub(earlier.ack_frequency_received),
            mtu: self.mtu,
            rtt_us: self.rtt_us,
        }
    }

    /// Counters added up over connections; the largest MTU and RTT.
    pub fn add(&mut self, o: &Self) {
        self.tx_datagrams += o.tx_datagrams;
        self.tx_calls += o.tx_calls;
        self.rx_datagrams += o.rx_datagrams;
        self.gro = match (self.gro, o.gro) {
            (Some(a), Some(b)) => Some(a && b),
            (a, b) => a.or(b),
        };
        self.acks_sent += o.acks_sent;
        self.acks_received += o.acks_received;
        self.ack_frequency_sent += o.ack_frequency_sent;
        self.ack_frequency_received += o.ack_frequency_received;
        self.mtu = self.mtu.max(o.mtu);
        self.rtt_us = self.rtt_us.max(o.rtt_us);
    }
}

#[cfg(test)]
mod tests;
