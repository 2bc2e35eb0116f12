//! Who may read a connection's telemetry, and what an operator is told when the server listens
//! beyond loopback.

use std::net::{IpAddr, SocketAddr};

use http::{header, HeaderMap, StatusCode};
use ring::rand::{SecureRandom, SystemRandom};

use crate::options::TelemetryAccess;

/// The environment variable that fixes the token of `--telemetry token` (one token for many
/// servers); the server makes a random one otherwise. Clients read it too.
pub const TOKEN_ENV: &str = "QBENCH_TELEMETRY_TOKEN";

/// The query parameter that carries the token (the `Authorization: Bearer` header does too).
pub const TOKEN_QUERY: &str = "token";

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("{TOKEN_ENV}: the token must be 16 to 128 characters of [A-Za-z0-9._~-]")]
    BadToken,
    #[error("--telemetry token: the system random source failed")]
    Random,
}

#[derive(Debug, Clone)]
pub struct Access {
    mode: TelemetryAccess,
    token: Option<String>,
}

/// The answer to one telemetry request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    Allowed,
    Denied(StatusCode, &'static str),
}

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"._~-".contains(&c)
}

impl Access {
    /// The rule for `mode`; with `token`, `env_token` (the value of `TOKEN_ENV`) or a random one.
    pub fn new(mode: TelemetryAccess, env_token: Option<String>) -> Result<Self, AccessError> {
        let token = match mode {
            TelemetryAccess::Token => Some(match env_token {
                Some(t) if (16..=128).contains(&t.len()) && t.bytes().all(token_char) => t,
                Some(_) => return Err(AccessError::BadToken),
                None => random_token()?,
            }),
            _ => None,
        };
        Ok(Self { mode, token })
    }

    pub fn mode(&self) -> TelemetryAccess {
        self.mode
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// May `peer` read telemetry with this request's headers and query string?
    pub fn check(&self, peer: IpAddr, headers: &HeaderMap, query: Option<&str>) -> Grant {
        match self.mode {
            TelemetryAccess::On => Grant::Allowed,
            TelemetryAccess::Off => {
                Grant::Denied(StatusCode::NOT_FOUND, "telemetry is off on this server\n")
            }
            TelemetryAccess::Loopback if loopback(peer) => Grant::Allowed,
            TelemetryAccess::Loopback => Grant::Denied(
                StatusCode::FORBIDDEN,
                "telemetry is served to loopback peers only\n",
            ),
            TelemetryAccess::Token => {
                let want = self.token.as_deref().unwrap_or_default();
                let given = bearer(headers).or_else(|| query_token(query));
                match given {
                    Some(t) if same(t.as_bytes(), want.as_bytes()) => Grant::Allowed,
                    _ => Grant::Denied(
                        StatusCode::UNAUTHORIZED,
                        "telemetry needs the server's token (qbench --telemetry-token)\n",
                    ),
                }
            }
        }
    }
}

fn loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
        IpAddr::V4(v4) => v4.is_loopback(),
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    v.strip_prefix("Bearer ")
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix(TOKEN_QUERY)?.strip_prefix('='))
}

/// Compares without stopping at the first difference, so timing does not leak a prefix.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_token() -> Result<String, AccessError> {
    let mut raw = [0u8; 16];
    SystemRandom::new()
        .fill(&mut raw)
        .map_err(|_| AccessError::Random)?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// The warning for a server reachable beyond this host, or `None` on loopback.
pub fn exposure_warning(
    listen: SocketAddr,
    max_object: u64,
    mode: TelemetryAccess,
) -> Option<String> {
    if loopback(listen.ip()) {
        return None;
    }
    let telemetry = match mode {
        TelemetryAccess::On => {
            "and every connection's telemetry is served to anyone who asks \
                                (restrict it with --telemetry loopback|token|off)"
        }
        TelemetryAccess::Off => "(telemetry is off)",
        TelemetryAccess::Loopback => "(telemetry is served to loopback peers only)",
        TelemetryAccess::Token => "(telemetry needs the token)",
    };
    Some(format!(
        "warning: listening on {listen}, beyond loopback: anyone who can reach it may fetch \
         /bytes/{{n}} up to --max-object ({max_object} bytes) per request without \
         authentication, {telemetry}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn token_mode_needs_the_token_by_header_or_query() {
        let tok = "abcdefghijklmnop".to_string();
        let a = Access::new(TelemetryAccess::Token, Some(tok.clone())).unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let ok = format!("Bearer {tok}");
        assert_eq!(a.check(ip, &headers(Some(&ok)), None), Grant::Allowed);
        let q = format!("x=1&token={tok}");
        assert_eq!(a.check(ip, &headers(None), Some(&q)), Grant::Allowed);
        for bad in [
            None,
            Some("Bearer abcdefghijklmnoq"),
            Some("abcdefghijklmnop"),
        ] {
            let g = a.check(ip, &headers(bad), Some("token=abc"));
            assert!(
                matches!(g, Grant::Denied(StatusCode::UNAUTHORIZED, _)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn random_tokens_differ_and_bad_fixed_tokens_are_refused() {
        let a = Access::new(TelemetryAccess::Token, None).unwrap();
        let b = Access::new(TelemetryAccess::Token, None).unwrap();
        assert_eq!(a.token().unwrap().len(), 32);
        assert_ne!(a.token(), b.token());
        for bad in ["short", "has space in it 12345", &"x".repeat(129)] {
            assert!(Access::new(TelemetryAccess::Token, Some(bad.into())).is_err());
        }
        assert!(Access::new(TelemetryAccess::On, None)
            .unwrap()
            .token()
            .is_none());
    }

    #[test]
    fn loopback_mode_checks_the_peer_address() {
        let a = Access::new(TelemetryAccess::Loopback, None).unwrap();
        for ip in ["127.0.0.1", "::1", "::ffff:127.0.0.1"] {
            let g = a.check(ip.parse().unwrap(), &headers(None), None);
            assert_eq!(g, Grant::Allowed, "{ip}");
        }
        let far = a.check("198.18.0.1".parse().unwrap(), &headers(None), None);
        assert!(matches!(far, Grant::Denied(StatusCode::FORBIDDEN, _)));
        let off = Access::new(TelemetryAccess::Off, None).unwrap();
        let g = off.check("127.0.0.1".parse().unwrap(), &headers(None), None);
        assert!(matches!(g, Grant::Denied(StatusCode::NOT_FOUND, _)));
    }

    proptest::proptest! {
        #[test]
        fn any_header_or_query_is_a_grant_or_a_refusal(
            auth in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            query in "\\PC{0,64}",
        ) {
            let a = Access::new(TelemetryAccess::Token, Some("abcdefghijklmnop".into())).unwrap();
            let mut h = HeaderMap::new();
            if let Ok(v) = http::HeaderValue::from_bytes(&auth) {
                h.insert(header::AUTHORIZATION, v);
            }
            let g = a.check("127.0.0.1".parse().unwrap(), &h, Some(&query));
            let header = h.get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            let query_tok = query.split('&').find_map(|kv| kv.strip_prefix("token="));
            let given = header.or(query_tok) == Some("abcdefghijklmnop");
            proptest::prop_assert_eq!(g == Grant::Allowed, given);
        }
    }

    #[test]
    fn warns_beyond_loopback_only() {
        let mode = TelemetryAccess::On;
        assert!(exposure_warning("127.0.0.1:1".parse().unwrap(), 10, mode).is_none());
        assert!(exposure_warning("[::1]:1".parse().unwrap(), 10, mode).is_none());
        let w = exposure_warning("0.0.0.0:4433".parse().unwrap(), 10, mode).unwrap();
        assert!(w.contains("/bytes") && w.contains("telemetry"), "{w}");
        let w = exposure_warning("198.18.0.1:4433".parse().unwrap(), 10, mode).unwrap();
        assert!(w.contains("--telemetry loopback|token|off"), "{w}");
    }
}
