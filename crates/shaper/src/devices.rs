//! The names of the devices a plan makes: each namespace's veth end and the userspace
//! forwarder's TUN devices.

/// Interface names inside the namespaces (unique per namespace, so fixed).
pub const CLIENT_IF: &str = "qb-c0";
pub const SERVER_IF: &str = "qb-s0";
/// Router side facing the client: egress here is the *down* direction.
pub const ROUTER_TO_CLIENT: &str = "qb-rc";
/// Router side facing the server: egress here is the *up* direction.
pub const ROUTER_TO_SERVER: &str = "qb-rs";
pub const TUN_UP: &str = "qb-tup";
pub const TUN_DOWN: &str = qbench_core::report::link::FORWARDER_DOWN;
