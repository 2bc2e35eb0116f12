//! The object list a run fetches: `200x5KB`, `1x210MB`, `10x100KB,1x1MB`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::units::{ByteSize, UnitError};

/// Upper bound on objects per run, so a typo cannot allocate gigabytes of bookkeeping.
pub const MAX_OBJECTS: u64 = 10_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("empty object list")]
    Empty,
    #[error("`{item}`: count must be a positive whole number")]
    Count { item: String },
    #[error("`{item}`: count must be at least 1")]
    ZeroCount { item: String },
    #[error("`{item}`: {source}")]
    Size { item: String, source: UnitError },
    #[error("empty item in object list (stray comma?)")]
    EmptyItem,
    #[error("more than {MAX_OBJECTS} objects in total (the limit per run)")]
    TooMany,
}

/// `count` objects of `size` bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ObjectGroup {
    pub count: u64,
    pub size: ByteSize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub struct Workload {
    groups: Vec<ObjectGroup>,
}

impl Workload {
    pub fn new(groups: Vec<ObjectGroup>) -> Result<Self, WorkloadError> {
        if groups.is_empty() {
            return Err(WorkloadError::Empty);
        }
        let total = groups
            .iter()
            .try_fold(0u64, |sum, g| sum.checked_add(g.count));
        if total.is_none_or(|t| t > MAX_OBJECTS) {
            return Err(WorkloadError::TooMany);
        }
        Ok(Self { groups })
    }

    pub fn groups(&self) -> &[ObjectGroup] {
        &self.groups
    }

    pub fn total_objects(&self) -> u64 {
        self.groups.iter().map(|g| g.count).sum()
    }

    /// Saturates at `u64::MAX` (16 EiB): sizes are only bounded by what a URL can ask for.
    pub fn total_bytes(&self) -> u64 {
        self.groups.iter().fold(0u64, |sum, g| {
            sum.saturating_add(g.count.saturating_mul(g.size.0))
        })
    }

    /// Object sizes in request order: groups in the order written.
    pub fn sizes(&self) -> impl Iterator<Item = u64> + '_ {
        self.groups
            .iter()
            .flat_map(|g| std::iter::repeat_n(g.size.0, g.count as usize))
    }
}

/// `200x5KB`: the page of small objects the IMC'17 paper starts from.
impl Default for Workload {
    fn default() -> Self {
        Self {
            groups: vec![ObjectGroup {
                count: 200,
                size: ByteSize(5000),
            }],
        }
    }
}

fn parse_group(item: &str) -> Result<ObjectGroup, WorkloadError> {
    if item.is_empty() {
        return Err(WorkloadError::EmptyItem);
    }
    let (count, size) = match item.split_once(['x', 'X']) {
        Some((c, s)) => {
            let count: u64 = c.trim().parse().map_err(|_| WorkloadError::Count {
                item: item.to_string(),
            })?;
            (count, s)
        }
        None => (1, item),
    };
    if count == 0 {
        return Err(WorkloadError::ZeroCount {
            item: item.to_string(),
        });
    }
    let size = size
        .parse::<ByteSize>()
        .map_err(|source| WorkloadError::Size {
            item: item.to_string(),
            source,
        })?;
    Ok(ObjectGroup { count, size })
}

impl FromStr for Workload {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Err(WorkloadError::Empty);
        }
        let groups = s
            .split(',')
            .map(|item| parse_group(item.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(groups)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, g) in self.groups.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}x{}", g.count, g.size)?;
        }
        Ok(())
    }
}

impl TryFrom<String> for Workload {
    type Error = WorkloadError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Workload> for String {
    fn from(w: Workload) -> Self {
        w.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_that_overflow_are_too_many_not_a_panic() {
        for s in [
            "18446744073709551615x1B,2x1B",
            "18446744073709551615x1B,1x1B",
            "9223372036854775808x1B,9223372036854775808x1B",
        ] {
            assert_eq!(s.parse::<Workload>(), Err(WorkloadError::TooMany), "{s}");
        }
        let w: Workload = "2x18446744073709551615B".parse().unwrap();
        assert_eq!(w.total_bytes(), u64::MAX);
    }

    proptest! {
        #[test]
        fn any_text_is_a_workload_or_an_error(s in "\\PC{0,40}") {
            if let Ok(w) = s.parse::<Workload>() {
                prop_assert!((1..=MAX_OBJECTS).contains(&w.total_objects()));
            }
        }

        #[test]
        fn any_counts_are_a_workload_or_an_error(
            groups in proptest::collection::vec((any::<u64>(), any::<u64>()), 1..5)
        ) {
            let text: Vec<String> = groups.iter().map(|(c, b)| format!("{c}x{b}B")).collect();
            if let Ok(w) = text.join(",").parse::<Workload>() {
                prop_assert!(w.total_objects() <= MAX_OBJECTS);
                let _ = w.total_bytes();
            }
        }
    }

    #[test]
    fn parses_lists() {
        let w: Workload = "10x100KB,1x1MB".parse().unwrap();
        assert_eq!(w.total_objects(), 11);
        assert_eq!(w.total_bytes(), 2_000_000);
        assert_eq!(w.sizes().collect::<Vec<_>>()[10], 1_000_000);
        assert_eq!(w.to_string(), "10x100KB,1x1MB");
        let single: Workload = "1MiB".parse().unwrap();
        assert_eq!(single.total_bytes(), 1 << 20);
    }

    #[test]
    fn rejects_bad_lists() {
        insta::assert_snapshot!([
            "",
            "0x5KB",
            "ax5KB",
            "200x5kb",
            "200x",
            "20000000x1B",
            "1x5KB,,"
        ]
        .iter()
        .map(|s| format!("{s:?}: {}", s.parse::<Workload>().unwrap_err()))
        .collect::<Vec<_>>()
        .join("\n"));
    }
}
