//! What the server answers, independent of the HTTP version that carries it.

use http::{header, HeaderValue, Method, Response, StatusCode};

/// Largest body the server agrees to send unless configured otherwise (decimal 10 GB).
pub const DEFAULT_MAX_OBJECT: u64 = 10_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /bytes/{n}`: n bytes of the shared pattern.
    Bytes(u64),
    /// Anything else: a short text body with this status.
    Text(StatusCode, &'static str),
}

pub fn route(method: &Method, path: &str, max_object: u64) -> Route {
    if method != Method::GET && method != Method::HEAD {
        return Route::Text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    }
    match path.strip_prefix("/bytes/") {
        Some(n) => match n.parse::<u64>() {
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

impl Route {
    pub fn body_len(&self) -> u64 {
        match self {
            Route::Bytes(n) => *n,
            Route::Text(_, t) => t.len() as u64,
        }
    }

    /// Response head shared by every HTTP version.
    pub fn head(&self) -> Response<()> {
        let (status, ctype) = match self {
            Route::Bytes(_) => (StatusCode::OK, "application/octet-stream"),
            Route::Text(s, _) => (*s, "text/plain"),
        };
        let mut resp = Response::new(());
        *resp.status_mut() = status;
        let h = resp.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(self.body_len()));
        resp
    }
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
        assert_eq!(too_big.head().status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            route(&Method::GET, "/bytes/x", 10).head().status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            route(&Method::POST, "/bytes/1", 10).head().status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            route(&Method::GET, "/nope", 10).head().status(),
            StatusCode::NOT_FOUND
        );
        let head = Route::Bytes(42).head();
        assert_eq!(head.headers()[header::CONTENT_LENGTH], "42");
        assert_eq!(head.headers()[header::CACHE_CONTROL], "no-store");
    }
}
