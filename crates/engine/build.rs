//! Records the versions of the protocol stacks from Cargo.lock, for the report's environment.

use std::path::PathBuf;

const STACKS: &[&str] = &[
    "quinn",
    "quinn-proto",
    "quinn-udp",
    // The HTTP/3 stack: h3's implementation as the `http3` crate carries it on.
    "http3",
    "hyper",
    "h2",
    "rustls",
    "ring",
    "tokio",
];

fn main() {
    let lock = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    let mut found = Vec::new();
    let mut name: Option<&str> = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"'));
        } else if let (Some(v), Some(n)) = (line.strip_prefix("version = "), name.take()) {
            if STACKS.contains(&n) {
                found.push(format!("{n}={}", v.trim_matches('"')));
            }
        }
    }
    println!("cargo:rustc-env=QBENCH_STACK_VERSIONS={}", found.join(";"));
}
