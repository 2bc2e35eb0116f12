//! Maps errors from every layer (io, rustls, quinn, h3, h2, hyper) to one `ErrorKind`.

use std::error::Error as StdError;
use std::io;

use qbench_core::ErrorKind;

/// TLS alert no_application_protocol (RFC 7301), as a QUIC CRYPTO_ERROR code 0x100 + 120.
const QUIC_CRYPTO_NO_ALPN: u64 = 0x100 + 120;

fn io_kind(e: &io::Error) -> Option<ErrorKind> {
    use io::ErrorKind as K;
    Some(match e.kind() {
        K::ConnectionRefused => ErrorKind::Refused,
        K::TimedOut => ErrorKind::Timeout,
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => ErrorKind::Reset,
        K::UnexpectedEof => ErrorKind::Reset,
        K::NetworkUnreachable | K::HostUnreachable | K::AddrNotAvailable => ErrorKind::Unreachable,
        _ => return None,
    })
}

fn rustls_kind(e: &rustls::Error) -> ErrorKind {
    match e {
        rustls::Error::NoApplicationProtocol
        | rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol) => {
            ErrorKind::Alpn
        }
        _ => ErrorKind::Tls,
    }
}

fn quic_code_kind(code: u64) -> ErrorKind {
    match code {
        QUIC_CRYPTO_NO_ALPN => ErrorKind::Alpn,
        0x100..=0x1ff => ErrorKind::Tls,
        _ => ErrorKind::Protocol,
    }
}

fn quinn_kind(e: &quinn::ConnectionError) -> ErrorKind {
    use quinn::ConnectionError as C;
    match e {
        C::TimedOut => ErrorKind::Timeout,
        C::TransportError(t) => quic_code_kind(u64::from(t.code)),
        C::ConnectionClosed(c) => quic_code_kind(u64::from(c.error_code)),
        C::ApplicationClosed(_) | C::Reset => ErrorKind::Reset,
        C::VersionMismatch | C::CidsExhausted => ErrorKind::Protocol,
        C::LocallyClosed => ErrorKind::Io,
    }
}

fn h3_conn_kind(e: &h3::error::ConnectionError) -> Option<ErrorKind> {
    use h3::error::ConnectionError as C;
    use h3::quic::ConnectionErrorIncoming as I;
    match e {
        C::Timeout | C::Remote(I::Timeout) => Some(ErrorKind::Timeout),
        C::Remote(I::Undefined(inner)) => inner
            .downcast_ref::<quinn::ConnectionError>()
            .map(quinn_kind),
        C::Remote(I::ApplicationClose { .. }) => Some(ErrorKind::Reset),
        _ => Some(ErrorKind::Protocol),
    }
}

fn h3_stream_kind(e: &h3::error::StreamError) -> Option<ErrorKind> {
    use h3::error::StreamError as S;
    match e {
        S::RemoteTerminate { .. } | S::GoawayRejected { .. } => Some(ErrorKind::Reset),
        S::ConnectionError(c) => h3_conn_kind(c),
        S::HeaderTooBig { .. } | S::StreamError { .. } => Some(ErrorKind::Protocol),
        _ => None,
    }
}

fn h2_kind(e: &h2::Error) -> Option<ErrorKind> {
    if let Some(io) = e.get_io() {
        return io_kind(io);
    }
    if e.is_reset() || e.is_go_away() && e.is_remote() {
        return Some(ErrorKind::Reset);
    }
    Some(ErrorKind::Protocol)
}

fn one(e: &(dyn StdError + 'static)) -> Option<ErrorKind> {
    if let Some(e) = e.downcast_ref::<rustls::Error>() {
        return Some(rustls_kind(e));
    }
    if let Some(e) = e.downcast_ref::<quinn::ConnectionError>() {
        return Some(quinn_kind(e));
    }
    if let Some(e) = e.downcast_ref::<h3::error::StreamError>() {
        return h3_stream_kind(e);
    }
    if let Some(e) = e.downcast_ref::<h3::error::ConnectionError>() {
        return h3_conn_kind(e);
    }
    if let Some(e) = e.downcast_ref::<h2::Error>() {
        return h2_kind(e);
    }
    if let Some(e) = e.downcast_ref::<io::Error>() {
        // rustls errors travel inside io::Error(InvalidData) through tokio-rustls.
        if let Some(inner) = e.get_ref() {
            if let Some(k) = one(inner) {
                return Some(k);
            }
        }
        return io_kind(e);
    }
    None
}

/// The most specific kind found along the error's source chain.
pub(super) fn classify(e: &(dyn StdError + 'static)) -> ErrorKind {
    let mut cur = Some(e);
    let mut fallback = None;
    while let Some(err) = cur {
        if let Some(k) = one(err) {
            return k;
        }
        if fallback.is_none() {
            if let Some(h) = err.downcast_ref::<hyper::Error>() {
                if h.is_parse() || h.is_user() {
                    fallback = Some(ErrorKind::Protocol);
                } else if h.is_incomplete_message() || h.is_closed() || h.is_canceled() {
                    fallback = Some(ErrorKind::Reset);
                } else if h.is_timeout() {
                    fallback = Some(ErrorKind::Timeout);
                }
            }
        }
        cur = err.source();
    }
    fallback.unwrap_or(ErrorKind::Io)
}

/// Why the server never processed a request, as it says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unprocessed {
    /// The connection is going away: above a GOAWAY's last stream, or a GOAWAY before it.
    Closing,
    /// The stream alone was turned away and the connection goes on (HTTP/2 REFUSED_STREAM,
    /// HTTP/3 H3_REQUEST_REJECTED): above the server's stream limit before its SETTINGS
    /// arrived, or the server shedding load.
    Refused,
}

/// Whether the server says it never processed the request, so that it may be sent again
/// elsewhere: RFC 9113 6.8 and 8.7 (streams above a GOAWAY's last stream id, REFUSED_STREAM),
/// RFC 9114 5.2 and 8.1 (a GOAWAY before the request, H3_REQUEST_REJECTED).
pub(super) fn unprocessed(e: &(dyn StdError + 'static)) -> Option<Unprocessed> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<h2::Error>() {
            return match (h.is_remote(), h.is_go_away(), h.reason()) {
                (true, true, _) => Some(Unprocessed::Closing),
                (true, false, Some(h2::Reason::REFUSED_STREAM)) => Some(Unprocessed::Refused),
                _ => None,
            };
        }
        if let Some(s) = err.downcast_ref::<h3::error::StreamError>() {
            use h3::error::StreamError as S;
            return match s {
                // The server's GOAWAY guarantees it never processed this request.
                S::GoawayRejected { .. } => Some(Unprocessed::Closing),
                S::RemoteTerminate { code } if *code == h3::error::Code::H3_REQUEST_REJECTED => {
                    Some(Unprocessed::Refused)
                }
                _ => None,
            };
        }
        // io::Error's source skips the error it wraps.
        if let Some(inner) = err.downcast_ref::<io::Error>().and_then(|e| e.get_ref()) {
            return unprocessed(inner);
        }
        cur = err.source();
    }
    None
}

/// What to do about a failure whose message says what went wrong (rustls and quinn say it
/// alike, in text): read by people, so it names the flag that helps.
pub(super) fn hint(message: &str) -> Option<&'static str> {
    let has = |s: &str| message.contains(s);
    Some(if has("CaUsedAsEndEntity") {
        "the server presents a CA certificate (basicConstraints CA:TRUE, what `openssl req -x509` makes by default) as its own, which rustls refuses: make a leaf certificate (openssl req -x509 ... -addext basicConstraints=critical,CA:FALSE -addext subjectAltName=DNS:NAME) or let qbench-server generate one"
    } else if has("UnknownIssuer") {
        "the server's certificate is not signed by a CA this client trusts: pass it (or its CA) with --ca FILE (qbench serve and qbench-server write theirs with --cert-out), or skip verification with --insecure"
    } else if has("not valid for name") || has("NotValidForName") {
        "the certificate does not name the host in the URL: put a name it holds in --target/--url and the address in --connect-to IP:PORT, or give the server that name (qbench-server --cert-name NAME)"
    } else if has("certificate expired") || has("Expired") {
        "the certificate has expired, or this machine's clock is wrong"
    } else if has("QUIC handshake with") && has("no progress") {
        "no QUIC packet came back: is UDP to that port reachable? Firewalls and some networks drop UDP while TCP (h1, h2) gets through"
    } else {
        return None;
    })
}

/// The error and its causes on one line.
pub(super) use qbench_core::errors::one_line;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors() {
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(classify(&e), ErrorKind::Refused);
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(classify(&tls), ErrorKind::Tls);
        let alpn = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::NoApplicationProtocol,
        );
        assert_eq!(classify(&alpn), ErrorKind::Alpn);
    }

    /// The requests a server says it never processed, and only those, may go again.
    #[test]
    fn unprocessed_requests() {
        use h3::error::{Code, StreamError};
        let closing = Some(Unprocessed::Closing);
        let id = |n: u64| h3::quic::StreamId::try_from(n).expect("a stream id");
        let goaway = || StreamError::GoawayRejected {
            stream_id: id(8),
            boundary: id(4),
        };
        assert_eq!(unprocessed(&goaway()), closing);
        let rejected = StreamError::RemoteTerminate {
            code: Code::H3_REQUEST_REJECTED,
        };
        assert_eq!(unprocessed(&rejected), Some(Unprocessed::Refused));
        let cancelled = StreamError::RemoteTerminate {
            code: Code::H3_REQUEST_CANCELLED,
        };
        assert_eq!(unprocessed(&cancelled), None);
        // Ours, not the server's: h2 made it, so the server has said nothing.
        assert_eq!(
            unprocessed(&h2::Error::from(h2::Reason::REFUSED_STREAM)),
            None
        );
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(unprocessed(&reset), None);
        // Found along the source chain, as transports wrap it.
        let wrapped = io::Error::other(goaway());
        assert_eq!(unprocessed(&wrapped), closing);
        let wrapped = io::Error::other(rejected);
        assert_eq!(unprocessed(&wrapped), Some(Unprocessed::Refused));
    }

    #[test]
    fn quic_crypto_codes() {
        assert_eq!(quic_code_kind(0x178), ErrorKind::Alpn);
        assert_eq!(quic_code_kind(0x12a), ErrorKind::Tls);
        let untrusted = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert!(hint(&untrusted.to_string()).unwrap().contains("--ca FILE"));
        assert_eq!(hint("reset by peer"), None);
        assert_eq!(quic_code_kind(0x0a), ErrorKind::Protocol);
        let e = quinn::ConnectionError::TimedOut;
        assert_eq!(classify(&e), ErrorKind::Timeout);
    }
}
