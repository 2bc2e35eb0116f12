//! `--link` and how it is built and checked: the chain beyond it, the backend, the veths'
//! offloads, calibration and `--dry-run`.

use clap::Args;
use qbench_core::spec::link::LinkSpec;
use qbench_shaper::{BackendChoice, Offloads};

#[derive(Debug, Clone, Args)]
pub struct LinkBuildArgs {
    /// Run client and in-process server in network namespaces with an emulated link between
    /// them, e.g. rate=100mbit,rtt=36ms,loss=1% (fields: rate, rtt, delay, jitter, loss,
    /// reorder, queue, mtu; up./down. prefixes; rate=50..150mbit/1s, rate=trace:FILE or a
    /// Mahimahi delivery trace, rate=mahimahi:FILE). Measured before the first run. Root
    #[arg(long, visible_alias = "link-a", value_name = "SPEC")]
    pub link: Option<LinkSpec>,

    #[command(flatten)]
    pub chain: crate::flags::chain::ChainArgs,

    /// How to emulate the link: netem where the kernel has it, else tc + nftables + a
    /// userspace delay path
    #[arg(long, value_enum, default_value = "auto", requires = "link")]
    pub backend: BackendChoice,

    /// GSO/TSO/GRO on the link's veth interfaces
    #[arg(long, value_enum, default_value = "default", requires = "link")]
    pub offloads: Offloads,

    /// Print the commands --link would run, as a shell script, and exit
    #[arg(long, requires = "link")]
    pub dry_run: bool,

    /// Do not measure the link before the first run. By default an echo probe (round trips,
    /// loss, reordering each way) and a saturating UDP flow per fixed rate check it, the
    /// report records asked against measured (`link.calibration`), and a field beyond its
    /// tolerance prints a warning naming it
    #[arg(long, requires = "link")]
    pub no_calibrate: bool,

    /// Refuse to run over a link that misses a field of its spec beyond the tolerances
    /// (rate within 3%; median round trip within 0.5 ms or 5%; loss within the binomial's
    /// central 99%; no reordering unless jitter allows it)
    #[arg(long, requires = "link", conflicts_with = "no_calibrate")]
    pub strict_link: bool,
}
