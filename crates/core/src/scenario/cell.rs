//! The file `qbench sweep` writes per cell: which cell it was and what it measured.

use serde::{Deserialize, Serialize};

use crate::report::compare::CompareReport;
use crate::report::compete::CompeteReport;
use crate::scenario::Cell;

pub const SCHEMA: &str = "qbench.sweep-cell";
/// 5: comparisons are compare-report version 5 (an inconclusive one says why, `undecided`).
/// 4: comparisons are compare-report version 4 (test, effect interval, p; `auto_rounds`);
/// version 3 files read as judged by Welch's t-test.
/// 3: comparisons are compare-report version 3 (they name their metric); version 2 files
/// are still read, as PLT comparisons. 2: the cell is a typed spec hashed over its
/// serialized form (version 1 held command-line arguments and hashed those); the report is
/// tagged with its `kind`.
pub const SCHEMA_VERSION: u32 = 5;
/// The earliest version this qbench reads.
pub const OLDEST_READ: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CellReport {
    Compare(Box<CompareReport>),
    Compete(Box<CompeteReport>),
}

impl CellReport {
    pub fn complete(&self) -> bool {
        match self {
            Self::Compare(r) => r.complete,
            Self::Compete(r) => r.complete,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellFile {
    pub schema: String,
    pub schema_version: u32,
    pub scenario: String,
    pub cell: Cell,
    pub report: CellReport,
}

#[derive(Debug, thiserror::Error)]
pub enum CellFileError {
    #[error("not a qbench sweep cell: {0}")]
    Json(#[from] serde_json::Error),
    #[error("schema is `{0}`, not {SCHEMA}")]
    Schema(String),
    #[error("written by an earlier qbench (sweep-cell version {0}, this one reads versions {OLDEST_READ} to {SCHEMA_VERSION}): run the sweep again into a new --out directory")]
    Version(u32),
    #[error("written by a newer qbench (sweep-cell version {0}, this one reads version {SCHEMA_VERSION}): read it with that qbench")]
    Newer(u32),
    #[error("histogram `{field}`: {message}")]
    Histogram { field: String, message: String },
}

/// Only what every version of the file has.
#[derive(Deserialize, schemars::JsonSchema)]
struct Header {
    schema: String,
    #[serde(default = "first_version")]
    schema_version: u32,
}

fn first_version() -> u32 {
    1
}

impl CellFile {
    pub fn new(scenario: String, cell: Cell, report: CellReport) -> Self {
        Self {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            scenario,
            cell,
            report,
        }
    }

    /// Reads a cell file, telling an earlier version apart from a damaged one.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, CellFileError> {
        Self::check_header(bytes)?;
        let doc: serde_json::Value = serde_json::from_slice(bytes)?;
        if let Some((field, message)) = crate::report::histograms_read::first_corrupt(&doc) {
            return Err(CellFileError::Histogram { field, message });
        }
        Ok(serde_json::from_value(doc)?)
    }

    /// Whether `bytes` claim to be a cell file of this version, without building the reports.
    pub fn check_header(bytes: &[u8]) -> Result<(), CellFileError> {
        let h: Header = serde_json::from_slice(bytes)?;
        if h.schema != SCHEMA {
            return Err(CellFileError::Schema(h.schema));
        }
        if h.schema_version > SCHEMA_VERSION {
            return Err(CellFileError::Newer(h.schema_version));
        }
        if h.schema_version < OLDEST_READ {
            return Err(CellFileError::Version(h.schema_version));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_versions_are_named_not_misread() {
        let v1 = br#"{"schema":"qbench.sweep-cell","scenario":"x","cell":{"params":{},"command":"compare","args":[],"hash":"ab"},"report":{}}"#;
        let err = CellFile::from_slice(v1).unwrap_err().to_string();
        assert!(
            err.contains("sweep-cell version 1") && err.contains("new --out"),
            "{err}"
        );
        let other = br#"{"schema":"qbench.run-report","schema_version":2}"#;
        assert!(matches!(
            CellFile::from_slice(other),
            Err(CellFileError::Schema(_))
        ));
        assert!(matches!(
            CellFile::from_slice(b"{"),
            Err(CellFileError::Json(_))
        ));
    }

    proptest::proptest! {
        #[test]
        fn reading_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = CellFile::from_slice(&bytes);
        }
    }
}
