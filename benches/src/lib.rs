//! Shared fixtures for the criterion benches and the raw transfer baselines: TLS configurations
//! pinned to one cipher suite, so every bench states which AEAD it measured.

pub mod baseline;
pub mod mem_link;
pub mod quic_mem;
pub mod raw_h3;
pub mod sys;
pub mod tls;
