//! An application workload (a video session or a page) and what it shares with the run that
//! drives it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::observe::Observing;
use qbench_core::Recorder;

use crate::measure::clock::Clock;
use crate::transport::verify::DigestBook;
use crate::transport::ObjectReq;

/// An application workload: it decides what to fetch, and when, as it goes.
#[derive(Clone)]
pub(crate) enum App {
    Video(qbench_core::video::VideoSpec),
    Page(Arc<qbench_core::report::page::PageSpec>),
}

/// What an application workload shares with the rest of its run.
pub(crate) struct AppRun<'a> {
    pub rec: &'a Arc<Mutex<Recorder>>,
    pub book: &'a DigestBook,
    pub clock: Clock,
    /// When the run started (before connecting): its times count from here.
    pub start: Duration,
    /// `https://HOST:PORT` of the server every object comes from.
    pub base: &'a str,
    pub verify: bool,
    pub progress: &'a Observing,
    pub log: Option<&'a crate::drive::reqlog::LogTo>,
    /// A stopping signal: nothing more is requested, what is in flight finishes.
    pub stop: &'a crate::drive::until::Stop,
}

impl AppRun<'_> {
    /// The request for `size` bytes of the server's payload.
    pub(crate) fn request(&self, size: u64) -> ObjectReq {
        ObjectReq {
            uri: format!("{}{}", self.base, qbench_core::wire::bytes_path(size))
                .parse()
                .expect("an authority and a /bytes path make a URI"),
            expected_len: Some(size),
            verify: self.verify,
        }
    }
}

#[derive(Clone)]
pub(crate) struct AppPlan {
    pub app: App,
    /// `https://HOST:PORT` of the server its objects come from.
    pub base: String,
    /// `--verify`: check bodies against the payload pattern.
    pub verify: bool,
    /// HTTP/1.1: a page opens up to six connections per origin.
    pub h1: bool,
}
