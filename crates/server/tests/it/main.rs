//! The integration tests of `qbench-server`, one binary: a module per area.

mod common;
mod curl_interop;
mod h2_writes;
mod heap;
mod ngtcp2_interop;
mod process;
mod quicgo_interop;
mod requests;
mod sockets;
mod timeouts;
mod tls_records;
