//! The contract both ends speak: the protocols and their ALPN ids, the object and telemetry
//! paths, the payload pattern, and the windows and buffer sizes both stacks are tuned with.
//! The client and the server take these from here, never from each other.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The HTTP version (and so the transport) a client or server speaks.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP/1.1 over TLS 1.3 over TCP
    #[cfg_attr(feature = "clap", value(name = "h1"))]
    H1,
    /// HTTP/2 over TLS 1.3 over TCP
    #[cfg_attr(feature = "clap", value(name = "h2"))]
    H2,
    /// HTTP/3 over QUIC
    #[cfg_attr(feature = "clap", value(name = "h3"))]
    H3,
}

pub const ALPN_H1: &[u8] = b"http/1.1";
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_H3: &[u8] = b"h3";

impl Protocol {
    pub const ALL: [Self; 3] = [Self::H1, Self::H2, Self::H3];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::H1 => "h1",
            Self::H2 => "h2",
            Self::H3 => "h3",
        }
    }

    pub fn alpn(self) -> &'static [u8] {
        match self {
            Self::H1 => ALPN_H1,
            Self::H2 => ALPN_H2,
            Self::H3 => ALPN_H3,
        }
    }

    /// QUIC (UDP) rather than TLS over TCP.
    pub fn is_quic(self) -> bool {
        self == Self::H3
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not h1, h2 or h3")]
pub struct ProtocolError(pub String);

impl FromStr for Protocol {
    type Err = ProtocolError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ProtocolError(s.to_string()))
    }
}

/// Sender congestion control, as qbench names it on both stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum CcAlgo {
    Cubic,
    #[cfg_attr(feature = "clap", value(name = "newreno"))]
    NewReno,
    Bbr,
}

impl CcAlgo {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cubic => "cubic",
            Self::NewReno => "newreno",
            Self::Bbr => "bbr",
        }
    }

    /// The Linux name of the same algorithm (TCP_CONGESTION).
    pub fn tcp_name(self) -> &'static str {
        match self {
            Self::Cubic => "cubic",
            Self::NewReno => "reno",
            Self::Bbr => "bbr",
        }
    }
}

impl fmt::Display for CcAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not cubic, newreno or bbr")]
pub struct CcAlgoError(pub String);

impl FromStr for CcAlgo {
    type Err = CcAlgoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Cubic, Self::NewReno, Self::Bbr]
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| CcAlgoError(s.to_string()))
    }
}

/// Where the server keeps a connection's sender timeline (JSON), fetched over that connection.
pub const TELEMETRY_PATH: &str = "/_qbench/telemetry";

const BYTES_PREFIX: &str = "/bytes/";

/// The path of an object of `n` payload bytes.
pub fn bytes_path(n: u64) -> String {
    format!("{BYTES_PREFIX}{n}")
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a byte count: use /bytes/{{n}}")]
pub struct BytesPathError(pub String);

/// `Some(Ok(n))` for `/bytes/{n}`, `Some(Err)` for a malformed count under `/bytes/`, `None`
/// for any other path.
pub fn parse_bytes_path(path: &str) -> Option<Result<u64, BytesPathError>> {
    let n = path.strip_prefix(BYTES_PREFIX)?;
    // u64's parser takes a leading '+'; the path is canonical digits only.
    let digits = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    Some(
        digits
            .then(|| n.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| BytesPathError(n.to_string())),
    )
}

/// The body of `/bytes/{n}` is this 64-byte pattern repeated, so any client can check content.
pub const PAYLOAD_PATTERN: &[u8; 64] =
    b"qbench-payload:0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJK\r\n";

/// The payload byte at `offset` of any object.
pub fn payload_byte(offset: u64) -> u8 {
    PAYLOAD_PATTERN[(offset % PAYLOAD_PATTERN.len() as u64) as usize]
}

/// The pattern 65 times over: the 4 KiB starting at any of its first 64 bytes are the payload
/// from that phase on, so a body is compared 4 KiB at a time (one `memcmp`) rather than byte
/// by byte; `--verify` then costs a client little beside TLS.
static PATTERN_RUN: [u8; PATTERN_RUN_LEN] = pattern_run();
const PATTERN_RUN_LEN: usize = 65 * PAYLOAD_PATTERN.len();
const CHECK_STEP: usize = PATTERN_RUN_LEN - PAYLOAD_PATTERN.len();

const fn pattern_run() -> [u8; PATTERN_RUN_LEN] {
    let mut run = [0u8; PATTERN_RUN_LEN];
    let mut i = 0;
    while i < PATTERN_RUN_LEN {
        run[i] = PAYLOAD_PATTERN[i % PAYLOAD_PATTERN.len()];
        i += 1;
    }
    run
}

/// Checks `chunk`, found at `offset` of a body, against the pattern: `Err` gives the offset of
/// the first wrong byte.
pub fn check_payload(offset: u64, chunk: &[u8]) -> Result<(), u64> {
    let mut i = 0;
    while i < chunk.len() {
        let at = ((offset + i as u64) % PAYLOAD_PATTERN.len() as u64) as usize;
        let n = CHECK_STEP.min(chunk.len() - i);
        let (got, want) = (&chunk[i..i + n], &PATTERN_RUN[at..at + n]);
        if got != want {
            let bad = got.iter().zip(want).position(|(a, b)| a != b);
            return Err(offset + (i + bad.unwrap_or(0)) as u64);
        }
        i += n;
    }
    Ok(())
}

/// Per-stream receive window of both stacks (QUIC and HTTP/2): the protocols' 64 KB default
/// would cap a bulk transfer long before the link does.
pub const STREAM_WINDOW: u32 = 16 * 1024 * 1024;
/// HTTP/2 connection window, and the QUIC sender's send window.
pub const CONN_WINDOW: u32 = 64 * 1024 * 1024;
/// Largest HTTP/2 DATA frame the client accepts: fewer frames per byte.
pub const MAX_H2_FRAME: u32 = 256 * 1024;
/// Requested UDP socket buffer size on both ends; the kernel caps it at
/// `net.core.{r,w}mem_max`.
pub const UDP_BUFFER: usize = 4 * 1024 * 1024;
/// Concurrent request streams per connection the server allows (h2 and h3 alike).
pub const MAX_STREAMS: u32 = 256;
/// Largest request header section the server accepts.
pub const MAX_REQUEST_HEADER_BYTES: u32 = 16 * 1024;
/// Largest response header section the client accepts.
pub const MAX_RESPONSE_HEADER_BYTES: u64 = 64 * 1024;
/// Largest `/bytes/{n}` the server agrees to send unless configured otherwise (decimal 10 GB).
pub const MAX_OBJECT: u64 = 10_000_000_000;
/// Largest telemetry body the client accepts: 60k samples of a few hundred bytes.
pub const MAX_TELEMETRY_BYTES: usize = 64 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn protocols_round_trip() {
        for p in Protocol::ALL {
            assert_eq!(p.as_str().parse::<Protocol>(), Ok(p));
            assert_eq!(
                serde_json::to_string(&p).unwrap(),
                format!("\"{}\"", p.as_str())
            );
        }
        assert_eq!("H3".parse::<Protocol>(), Ok(Protocol::H3));
        assert!("h4".parse::<Protocol>().is_err());
        assert_eq!(Protocol::H3.alpn(), b"h3");
        assert_eq!(Protocol::H1.alpn(), b"http/1.1");
        assert!(Protocol::H3.is_quic() && !Protocol::H2.is_quic());
    }

    #[test]
    fn bytes_paths() {
        assert_eq!(bytes_path(5000), "/bytes/5000");
        assert_eq!(parse_bytes_path("/bytes/5000"), Some(Ok(5000)));
        assert_eq!(parse_bytes_path("/bytes/0"), Some(Ok(0)));
        assert!(parse_bytes_path("/bytes/+5").unwrap().is_err());
        assert!(parse_bytes_path("/bytes/").unwrap().is_err());
        assert!(parse_bytes_path("/bytes/99999999999999999999")
            .unwrap()
            .is_err());
        assert_eq!(parse_bytes_path("/other"), None);
        assert_eq!(parse_bytes_path(TELEMETRY_PATH), None);
    }

    #[test]
    fn payload_check_finds_the_first_wrong_byte() {
        let body: Vec<u8> = (0..300).map(payload_byte).collect();
        assert_eq!(check_payload(0, &body), Ok(()));
        assert_eq!(check_payload(100, &body[100..]), Ok(()));
        let mut bad = body.clone();
        bad[130] ^= 1;
        assert_eq!(check_payload(0, &bad), Err(130));
        assert_eq!(check_payload(64, &bad[64..]), Err(130));
    }

    proptest! {
        #[test]
        fn bytes_path_parser_never_panics(s in "\\PC*") {
            let _ = parse_bytes_path(&s);
            let _ = s.parse::<Protocol>();
            let _ = s.parse::<CcAlgo>();
        }

        #[test]
        fn bytes_path_round_trips(n in any::<u64>()) {
            prop_assert_eq!(parse_bytes_path(&bytes_path(n)), Some(Ok(n)));
        }

        #[test]
        fn pattern_chunks_check_anywhere(offset in 0u64..1_000_000, len in 0usize..20_000) {
            let chunk: Vec<u8> = (offset..offset + len as u64).map(payload_byte).collect();
            prop_assert_eq!(check_payload(offset, &chunk), Ok(()));
        }

        #[test]
        fn the_first_wrong_byte_is_found_anywhere(
            offset in 0u64..1_000_000,
            len in 1usize..20_000,
            wrong in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        ) {
            let mut chunk: Vec<u8> = (offset..offset + len as u64).map(payload_byte).collect();
            // One flip per position: two could cancel out.
            let wrong: std::collections::BTreeMap<usize, u8> =
                wrong.iter().rev().map(|(at, flip)| (at.index(len), *flip)).collect();
            for (&at, flip) in &wrong {
                chunk[at] ^= flip;
            }
            let first = *wrong.keys().next().unwrap();
            prop_assert_eq!(check_payload(offset, &chunk), Err(offset + first as u64));
        }
    }
}
