//! What drives the requests of a run: closed loop, held and open loops, video sessions and pages, over the transports into the recorder.

pub mod app;
pub mod fetch;
pub mod hold;
pub mod pacer;
pub mod page;
pub mod reqlog;
pub mod requests;
pub mod runner;
pub mod third_party;
pub mod until;
pub mod video;
pub mod workers;
