//! qbench-stack: what both ends of a qbench run share below HTTP. The client and the server
//! build their QUIC and TCP transports from these pieces, so a setting or a counter means the
//! same thing on either side of a report.

pub mod activity;
pub mod crypto;
pub mod fdlimit;
pub mod h3_zero_copy;
pub mod heap;
pub mod keylog;
pub mod payload;
pub mod qlog;
pub mod quic_knobs;
pub mod rep_movsb;
pub mod reuseport;
pub mod sockopt;
