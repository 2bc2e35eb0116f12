//! The flags a single benchmark takes that `compare` refuses (its outputs about connections
//! and requests, its live view and intervals, its load's repetitions, a shard's place): they
//! come with `RunArgs`, which both share, and are kept out of `compare --help`, which lists
//! only what it takes. Given anyway, each is refused naming it.

/// The flags' ids (their field names in `RunArgs`).
pub const REFUSED_BY_COMPARE: [&str; 14] = [
    "qlog",
    "qlog_sample",
    "log_requests",
    "hgrm",
    "state_graph",
    "metrics_listen",
    "fail_early",
    "tui",
    "interval",
    "json_stream",
    "shard",
    "start_at",
    "runs",
    "reuse",
];

/// `a`, hidden from `compare --help` when `compare` refuses it.
pub fn hidden_in_compare(a: clap::Arg) -> clap::Arg {
    let refused = REFUSED_BY_COMPARE.contains(&a.get_id().as_str());
    let hidden = a.is_hide_set();
    a.hide(hidden || refused)
}
