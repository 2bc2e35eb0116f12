//! What one request's response came to: every transport reports through a `Progress`, so
//! the checks and the timings are the same for each.

use std::time::Duration;

use qbench_core::{ErrorKind, ObjectOutcome};

use super::verify::{Check, DigestBook};
use super::{received, FetchError, ObjectReq, RunEnd, Sink};
use crate::measure::clock::Clock;

/// Accumulates one response; every transport reports through it so checks are identical.
pub(crate) struct Progress<'a> {
    clock: &'a Clock,
    req: &'a ObjectReq,
    /// When the fetch began: the client took the request up. Read only where a figure uses
    /// it (an open loop's own lag); a closed loop's request is timed from its sending.
    began: Option<Duration>,
    /// When it was first sent; `None` before that.
    sent: Option<Duration>,
    /// Sent again on a new connection.
    again: bool,
    headers: Option<Duration>,
    content_length: Option<u64>,
    bytes: u64,
    check: Option<Check>,
    status: Option<u16>,
    stream: Option<u64>,
    /// Where the run may drop the request while it waits unsent (`Sink::unsent_until`).
    ends: Option<&'a dyn RunEnd>,
}

impl Sink for Progress<'_> {
    /// A request sent again on a new connection keeps its first time: the server's close
    /// and the new handshake are part of what it cost.
    fn sending(&mut self) {
        if self.sent.is_none() {
            self.sent = Some(self.clock.now());
        }
    }

    fn stream(&mut self, id: u64) {
        self.stream = Some(id);
    }

    /// Response head arrived; a non-2xx status is an error of kind `status`.
    fn headers(
        &mut self,
        status: http::StatusCode,
        headers: &http::HeaderMap,
    ) -> Result<(), FetchError> {
        self.headers = Some(self.clock.now());
        self.status = Some(status.as_u16());
        // With the length known from the request, the body is counted against it as it comes
        // and at its end (a lying content-length fails there, as the same kind): looking the
        // header up too costs a small object a cache miss or two, as its header map waits in
        // memory while thousands of other responses are parsed.
        if self.req.expected_len.is_none() {
            self.content_length = headers
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok());
        }
        if !status.is_success() {
            return Err(FetchError::new(
                ErrorKind::Status,
                format!("{} answered {status}", self.req.uri),
            ));
        }
        Ok(())
    }

    fn stamped(&self) -> Option<tokio::time::Instant> {
        if self.again {
            return None;
        }
        self.sent.or(self.began).map(|t| self.clock.at(t))
    }

    fn answered(&self) -> bool {
        self.headers.is_some() || self.bytes > 0
    }

    fn again(&mut self) {
        self.again = true;
    }

    fn unsent_until(&self) -> Option<&dyn RunEnd> {
        self.ends.filter(|_| self.sent.is_none())
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), FetchError> {
        self.bytes += chunk.len() as u64;
        received::add(chunk.len() as u64);
        if let Some(c) = &mut self.check {
            c.update(chunk);
        }
        match self.expected() {
            Some(want) if self.bytes > want => Err(FetchError::new(
                ErrorKind::LongBody,
                format!("{}: more than {want} body bytes", self.req.uri),
            )),
            _ => Ok(()),
        }
    }
}

impl<'a> Progress<'a> {
    pub(crate) fn start(clock: &'a Clock, req: &'a ObjectReq) -> Self {
        Self {
            began: Some(clock.now()),
            ..Self::closed_loop(clock, req)
        }
    }

    /// As [`Progress::start`] without reading the clock: a closed loop takes its next request
    /// up as the last one ends, and no figure uses when. One clock read fewer of the four a
    /// small object made; h2's timer reads its own start where it needs one.
    pub(crate) fn closed_loop(clock: &'a Clock, req: &'a ObjectReq) -> Self {
        Progress {
            clock,
            req,
            began: None,
            sent: None,
            again: false,
            headers: None,
            content_length: None,
            bytes: 0,
            status: None,
            stream: None,
            ends: None,
            check: req.verify.then(|| match req.expected_len {
                Some(_) => Check::pattern(),
                None => Check::digest(),
            }),
        }
    }

    /// A closed loop's request that the run drops if it ends (`end`: the held load's end, or
    /// a stop) while the request still waits for a stream: in a held load, requests queued in
    /// the client above the server's stream limit would otherwise stretch its end by their
    /// wait (9.6 s for `--duration 3s`), and a signal's stop by as long.
    pub(crate) fn unsent_until(mut self, end: &'a dyn RunEnd) -> Self {
        self.ends = Some(end);
        self
    }

    pub(crate) fn uri(&self) -> &'a http::Uri {
        &self.req.uri
    }

    fn expected(&self) -> Option<u64> {
        self.req.expected_len.or(self.content_length)
    }

    /// The exchange ended with `result`: the outcome.
    pub(super) fn end(self, result: Result<(), FetchError>, book: &DigestBook) -> ObjectOutcome {
        match result {
            Ok(()) => self.finish(book),
            Err(e) => self.fail(e),
        }
    }

    /// The body ended: checks byte count and content, and produces the outcome.
    pub(crate) fn finish(mut self, book: &DigestBook) -> ObjectOutcome {
        let done = self.clock.now();
        let err = match (self.expected(), self.check.take().map(Check::finish)) {
            (Some(want), _) if self.bytes < want => Some(FetchError::new(
                ErrorKind::ShortBody,
                format!("{}: {} of {want} body bytes", self.req.uri, self.bytes),
            )),
            (_, Some(Err(at))) => Some(FetchError::new(
                ErrorKind::BodyMismatch,
                format!(
                    "{}: body differs from the payload at byte {at}",
                    self.req.uri
                ),
            )),
            (_, Some(Ok(Some(d)))) => book.record(&self.req.uri.to_string(), &d).map(|prev| {
                FetchError::new(
                    ErrorKind::BodyMismatch,
                    format!(
                        "{}: sha256 {d} differs from an earlier fetch's {prev}",
                        self.req.uri
                    ),
                )
            }),
            _ => None,
        };
        self.outcome_at(done, err)
    }

    pub(crate) fn fail(self, e: FetchError) -> ObjectOutcome {
        let done = self.clock.now();
        self.outcome_at(done, Some(e))
    }

    fn outcome_at(&self, done: Duration, err: Option<FetchError>) -> ObjectOutcome {
        ObjectOutcome {
            intended: None,
            began: self.began,
            // Never sent: it ended where it began, or, unstamped, where it failed.
            sent: self.sent.or(self.began).unwrap_or(done),
            headers: self.headers,
            done,
            body_bytes: self.bytes,
            error: err.map(|e| Box::new((e.kind, e.message))),
            status: self.status,
            stream: self.stream,
        }
    }
}
