//! Where a benchmark or comparison writes what it measured, checked before the first run:
//! each output can be written, and no two of them name the same file or stream (a later
//! output would replace an earlier one, or two streams would interleave line by line).

use std::path::{Path, PathBuf};

use crate::error::ConfigError;
use crate::output::{check_writable, target};

/// Where a command writes what it measured; not part of what is measured.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// `--json`: a file, or `-` for stdout.
    pub json: Option<String>,
    pub state_graph: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    pub hgrm: Option<PathBuf>,
    pub log_requests: Option<PathBuf>,
    /// `--json-stream`: a file, or `-` for stdout.
    pub json_stream: Option<String>,
    /// `--keylog` (or `SSLKEYLOGFILE`): appended to, never replaced.
    pub keylog: Option<PathBuf>,
    /// `--html`: the report as a page, written whenever the JSON report is.
    pub html: Option<PathBuf>,
}

impl Outputs {
    /// Every output, with the flag that named it.
    fn named(&self) -> Vec<(&'static str, &Path)> {
        let mut all: Vec<(&'static str, &Path)> = Vec::new();
        if let Some(j) = &self.json {
            all.push(("--json", Path::new(j)));
        }
        for (flag, p) in [
            ("--state-graph", &self.state_graph),
            ("--plot", &self.plot),
            ("--hgrm", &self.hgrm),
            ("--log-requests", &self.log_requests),
            ("--html", &self.html),
        ] {
            if let Some(p) = p {
                all.push((flag, p));
            }
        }
        if let Some(j) = &self.json_stream {
            all.push(("--json-stream", Path::new(j)));
        }
        if let Some(k) = &self.keylog {
            all.push(("--keylog", k));
        }
        all
    }

    /// Whether an output goes to stdout, where the human summary then must not go.
    pub fn takes_stdout(&self) -> bool {
        self.named()
            .iter()
            .any(|(_, p)| matches!(target::resolve(p), Ok(target::Target::Stdout)))
    }

    /// Every output can be written and each has its own file, checked before the first run.
    pub fn check_writable(&self) -> Result<(), ConfigError> {
        for (flag, path) in self.named() {
            // The key log is opened for appending when the plan is made, which says why not.
            if flag != "--keylog" {
                check_writable(flag, path)?;
            }
        }
        target::check_distinct(&self.named())
    }

    /// No output (the key log, appended to, too) is one of the files the command reads.
    pub fn check_not_inputs(&self, inputs: &[(&str, &Path)]) -> Result<(), ConfigError> {
        crate::output::overwrite::check_not_inputs(&self.named(), inputs)
    }
}
