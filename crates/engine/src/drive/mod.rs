//! What drives the requests of a run: closed loop, held and open loops, video sessions and pages, over the transports into the recorder.

pub(crate) mod app;
pub(crate) mod fetch;
pub(crate) mod hold;
pub(crate) mod pace_timer;
pub(crate) mod pacer;
pub(crate) mod page;
pub(crate) mod reqlog;
pub(crate) mod requests;
pub(crate) mod runner;
pub(crate) mod third_party;
pub(crate) mod until;
pub(crate) mod video;
pub(crate) mod workers;
