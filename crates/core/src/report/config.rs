//! The validated configuration a run report says it used: the spec with whom it was fetched
//! from and how. It is the report's (it holds what the server's sender was set to), so it
//! sits here rather than beside the spec it flattens.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::spec::{RunSpec, Target};

/// The validated configuration a run report says it used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunConfig {
    #[serde(flatten)]
    pub spec: RunSpec,
    pub target: Target,
    pub total_objects: u64,
    pub insecure: bool,
    pub ca: Option<PathBuf>,
    pub connect_to: Option<SocketAddr>,
    /// The in-process server's sender at the start of each connection (none for a remote
    /// server: its settings are its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<crate::report::sender::SenderSetup>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_config_json_keeps_the_report_field_names() {
        let c = RunConfig {
            spec: RunSpec::default(),
            target: Target::InProcess,
            total_objects: 200,
            insecure: false,
            ca: None,
            connect_to: None,
            sender: None,
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["proto"], "h3");
        assert_eq!(v["objects"], "200x5KB");
        assert_eq!(v["timeout_ms"], 10_000);
        assert_eq!(v["sample_interval_us"], 10_000);
        assert_eq!(v["target"]["kind"], "in_process");
        let back: RunConfig = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
