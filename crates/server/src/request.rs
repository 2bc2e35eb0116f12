//! One request, whatever HTTP version carried it: its body read (and bounded) before the
//! answer, then the answer, with telemetry access and the one-body-per-connection rule.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;

use crate::routes::{route, Body, Route};
use crate::shared::{Shared, Stats};
use crate::telemetry::ConnTelemetry;

/// Largest request body read (and discarded) before answering; larger ones get 413.
pub const MAX_REQUEST_BODY: u64 = 64 * 1024;

/// What reading the request body to its end found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    Complete,
    TooLarge,
    /// The peer reset the stream or the connection broke: any answer is moot.
    Broken,
}

/// Reads a hyper request body to its end, keeping nothing, up to `MAX_REQUEST_BODY` bytes.
/// Answering only after the whole request arrived means a protocol error later in the request
/// (h2spec's cases) is seen while the stream is still open.
pub async fn drain_body(mut body: hyper::body::Incoming) -> Drained {
    // A content-length over the bound needs no reading to be refused.
    if http_body::Body::size_hint(&body).lower() > MAX_REQUEST_BODY {
        return Drained::TooLarge;
    }
    let mut seen = 0u64;
    loop {
        match body.frame().await {
            None => return Drained::Complete,
            Some(Err(_)) => return Drained::Broken,
            Some(Ok(f)) => {
                if let Some(d) = f.data_ref() {
                    seen += d.len() as u64;
                    if seen > MAX_REQUEST_BODY {
                        return Drained::TooLarge;
                    }
                }
            }
        }
    }
}

pub struct Answer {
    pub head: Response<()>,
    pub body: Body,
}

impl Answer {
    pub fn new(
        req: &Parts,
        peer: SocketAddr,
        drained: Drained,
        shared: &Shared,
        telemetry: Option<&Arc<ConnTelemetry>>,
    ) -> Self {
        let r = match drained {
            Drained::TooLarge => Route::Text(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body larger than 64 KiB\n",
            ),
            Drained::Complete | Drained::Broken => {
                route(&req.method, req.uri.path(), shared.opts.max_object)
            }
        };
        let (head, body) = r.respond(|| {
            if let crate::access::Grant::Denied(status, text) =
                shared
                    .access
                    .check(peer.ip(), &req.headers, req.uri.query())
            {
                return Err((status, text));
            }
            let t = telemetry.ok_or((
                StatusCode::NOT_FOUND,
                "telemetry is off on this server (--sample-interval 0)\n",
            ))?;
            t.body().ok_or_else(|| {
                Stats::bump(&shared.stats.telemetry_busy);
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    "one telemetry response at a time per connection\n",
                )
            })
        });
        let body = if req.method == Method::HEAD {
            Body::Bytes(Bytes::new())
        } else {
            body
        };
        Self { head, body }
    }
}
