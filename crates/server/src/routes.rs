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
            // 413 is about the request's content; this server refuses to serve the resource.
            Ok(_) => Route::Text(
                StatusCode::FORBIDDEN,
                "object larger than this server's --max-object\n",
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

/// The `Date` header (RFC 9110 6.6.1) for HTTP/3 responses, which no library adds as hyper
/// does for h1 and h2: formatted once per second per thread, not once per response.
pub fn date() -> HeaderValue {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        static CACHED: RefCell<(u64, Option<HeaderValue>)> = const { RefCell::new((0, None)) };
    }
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHED.with(|c| {
        let mut c = c.borrow_mut();
        match &c.1 {
            Some(v) if c.0 == secs => v.clone(),
            _ => {
                let v = HeaderValue::from_str(&httpdate::fmt_http_date(now))
                    .expect("an HTTP date is a valid header value");
                *c = (secs, Some(v.clone()));
                v
            }
        }
    })
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
        if status == StatusCode::METHOD_NOT_ALLOWED {
            // RFC 9110 15.5.6: a 405 lists the methods the resource supports.
            h.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
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
            StatusCode::FORBIDDEN
        );
        let post = route(&Method::POST, "/bytes/1", 10).respond(no_telemetry).0;
        assert_eq!(post.headers()[header::ALLOW], "GET, HEAD");
        let d = date();
        let parsed = httpdate::parse_http_date(d.to_str().unwrap()).unwrap();
        let off = std::time::SystemTime::now().duration_since(parsed).unwrap();
        assert!(off.as_secs() < 5, "{d:?}");
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
