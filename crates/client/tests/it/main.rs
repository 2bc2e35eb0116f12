//! The integration tests of `qbench`, one binary: a module per command or area. Tests that
//! need root, a link or a cgroup hold the machine while they run (`qbench_testkit::hold`).

mod apps;
mod bad_input;
mod caddy_interop;
mod chain;
mod client_cpu;
mod common;
mod compare;
mod compete;
mod congestion;
mod cost;
mod failures;
mod fleet;
mod fleet_ssh;
mod hgrm;
mod inputs;
mod keylog;
mod link;
mod load;
mod loopback;
mod manuals;
mod netem_kernel;
mod nginx_interop;
mod outputs;
mod proxy;
mod proxy_hostile;
mod qlog;
mod quic_knobs;
mod rep_movsb;
mod reqlog;
mod schema;
mod serve;
mod small_inputs;
mod sweep;
mod tls_hints;
mod unreachable;
