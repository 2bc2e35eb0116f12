//! An application workload (a video session or a page) and what it shares with the run that
//! drives it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::ProgressBar;
use qbench_core::Recorder;

use crate::drive::verify::DigestBook;
use crate::measure::clock::Clock;
use crate::transport::ObjectReq;

/// An application workload: it decides what to fetch, and when, as it goes.
#[derive(Clone)]
pub(crate) enum App {
    Video(qbench_core::video::VideoSpec),
    Page(Arc<qbench_core::page_report::PageSpec>),
}

/// What an application workload shares with the rest of its run.
pub(crate) struct AppRun<'a> {
    pub(crate) rec: &'a Arc<Mutex<Recorder>>,
    pub(crate) book: &'a DigestBook,
    pub(crate) clock: Clock,
    /// When the run started (before connecting): its times count from here.
    pub(crate) start: Duration,
    /// `https://HOST:PORT` of the server every object comes from.
    pub(crate) base: &'a str,
    pub(crate) verify: bool,
    pub(crate) progress: &'a ProgressBar,
    pub(crate) log: Option<&'a crate::drive::reqlog::LogTo>,
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
    pub(crate) app: App,
    /// `https://HOST:PORT` of the server its objects come from.
    pub(crate) base: String,
    /// `--verify`: check bodies against the payload pattern.
    pub(crate) verify: bool,
    /// HTTP/1.1: a page opens up to six connections per origin.
    pub(crate) h1: bool,
}
