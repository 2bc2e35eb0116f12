//! Value parsers and bounds that more than one group of flags uses.

use qbench_core::spec::cpulimit::CpuQuota;
use qbench_core::units::ByteSize;

pub(crate) fn parse_rwnd(s: &str) -> Result<ByteSize, String> {
    s.parse().map_err(|e| format!("{e}"))
}

pub(crate) fn parse_client_cpu(s: &str) -> Result<f64, String> {
    qbench_core::spec::cpulimit::parse_fraction(s, qbench_engine::plan::cores())
}

pub(crate) fn parse_side_cpu(s: &str) -> Result<CpuQuota, String> {
    CpuQuota::parse(s, qbench_engine::plan::cores())
}
