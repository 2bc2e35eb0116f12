//! What the server answers, independent of the HTTP version that carries it.

use http::{header, HeaderValue, Method, Response, StatusCode};
use qbench_core::wire::{parse_bytes_path, TELEMETRY_PATH};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /bytes/{n}`: n bytes of the shared pattern.
    Bytes(u64),
    /// `GET /_qbench/telemetry`: this connection's sender timeline (JSON).
    Telemetry,
    /// Anything else: a short text body with this status.
    Text(StatusCode, &'static str),
}

pub fn route(method: &Method, path: &str, max_object: u64) -> Route {
    if method != Method::GET && method != Method::HEAD {
        return Route::Text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    }
    if path == TELEMETRY_PATH {
        return Route::Telemetry;
    }
    match parse_bytes_path(path) {
        Some(n) => match n {
            Ok(n) if n <= max_object => Route::Bytes(n),
            Ok(_) => Route::Text(
                StatusCode::PAYLOAD_TOO_LARGE,
                "object larger than --max-object\n",
            ),
            Err(_) => Route::Text(
                StatusCode::BAD_REQUEST,
                "use /bytes/{n} with n a byte count\n",
            ),
        },
        None if path == "/" => Route::Text(StatusCode::OK, "qbench-server: GET /bytes/{n}\n"),
        None => Route::Text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// The telemetry maker of a server with telemetry off.
pub fn no_telemetry() -> Result<bytes::Bytes, (StatusCode, &'static str)> {
    Err((StatusCode::NOT_FOUND, "telemetry is off on this server\n"))
}

impl Route {
    /// Response head shared by every HTTP version; `len` is the body length.
    pub fn head_with_len(&self, len: u64) -> Response<()> {
        let (status, ctype) = match self {
            Self::Bytes(_) => (StatusCode::OK, "application/octet-stream"),
            Self::Telemetry => (StatusCode::OK, "application/json"),
            Self::Text(s, _) => (*s, "text/plain"),
        };
        let mut resp = Response::new(());
        *resp.status_mut() = status;
        let h = resp.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        resp
    }

    /// The head and body of this route; `telemetry` makes the telemetry body, or says why not.
    pub fn respond(
        self,
        telemetry: impl FnOnce() -> Result<bytes::Bytes, (StatusCode, &'static str)>,
    ) -> (Response<()>, Body) {
        let body = match self {
            Self::Bytes(n) => Body::Payload(n),
            Self::Telemetry => match telemetry() {
                Ok(b) => Body::Bytes(b),
                Err((status, text)) => return Self::Text(status, text).respond(no_telemetry),
            },
            Self::Text(_, text) => Body::Bytes(bytes::Bytes::from_static(text.as_bytes())),
        };
        let len = match &body {
            Body::Payload(n) => *n,
            Body::Bytes(b) => b.len() as u64,
        };
        (self.head_with_len(len), body)
    }
}

/// What follows the head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// n bytes of the shared payload.
    Payload(u64),
    Bytes(bytes::Bytes),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(
            route(&Method::GET, "/bytes/5000", 10_000),
            Route::Bytes(5000)
        );
        assert_eq!(route(&Method::GET, "/bytes/0", 10), Route::Bytes(0));
        let too_big = route(&Method::GET, "/bytes/11", 10);
        assert_eq!(
            too_big.respond(no_telemetry).0.status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(
            route(&Method::GET, "/bytes/x", 10)
                .respond(no_telemetry)
                .0
                .status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            route(&Method::POST, "/bytes/1", 10)
                .respond(no_telemetry)
                .0
                .status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            route(&Method::GET, "/nope", 10)
                .respond(no_telemetry)
                .0
                .status(),
            StatusCode::NOT_FOUND
        );
        let (head, body) = Route::Bytes(42).respond(no_telemetry);
        assert_eq!(body, Body::Payload(42));
        let (off, _) = route(&Method::GET, "/_qbench/telemetry", 10).respond(no_telemetry);
        assert_eq!(off.status(), StatusCode::NOT_FOUND);
        assert_eq!(head.headers()[header::CONTENT_LENGTH], "42");
        assert_eq!(head.headers()[header::CACHE_CONTROL], "no-store");
    }
}
