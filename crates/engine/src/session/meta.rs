//! What a report says about how it was produced, fixed before its first run: the tool, the
//! start, the command line (without secrets), the configuration and the environment.

use qbench_core::{ReportMeta, ToolInfo};

use crate::plan::config::Config;

/// What a report says about how it was produced, fixed before the first run.
pub(crate) fn report_meta(cfg: &Config, command: Vec<String>) -> ReportMeta {
    ReportMeta {
        tool: ToolInfo {
            name: "qbench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        started_at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        command: redact(command),
        config: cfg.run.clone(),
        environment: crate::measure::env::collect(),
    }
}

/// The command line without the telemetry token's value.
fn redact(mut command: Vec<String>) -> Vec<String> {
    let mut hide_next = false;
    for arg in &mut command {
        if std::mem::take(&mut hide_next) {
            *arg = "<redacted>".into();
        } else if arg == "--telemetry-token" {
            hide_next = true;
        } else if arg.starts_with("--telemetry-token=") {
            *arg = "--telemetry-token=<redacted>".into();
        }
    }
    command
}
