//! A video session or a page against the rest of a spec: what a valid application workload
//! is, whether the spec came from flags or from a scenario cell.

use qbench_core::spec::RunSpec;
use qbench_core::video::VideoError;

use crate::error::{bad, usage, ConfigError};

/// The flag a video field is set by.
fn video_flag(e: &VideoError) -> &'static str {
    match e {
        VideoError::Shape { field, .. } => match *field {
            "segment" => "--segment",
            "length" => "--length",
            "start_buffer" => "--start-buffer",
            "max_buffer" => "--max-buffer",
            "watch" => "--watch",
            _ => "--video",
        },
        VideoError::Quality(_) => "--video-quality",
        _ => "--video",
    }
}

/// A video or a page against the rest of the spec (a scenario's as much as the flags').
pub fn check(s: &RunSpec) -> Result<(), ConfigError> {
    let app = match (&s.video, &s.page) {
        (Some(_), Some(_)) => return Err(bad("--page", "one workload per run: --video or --page")),
        (Some(v), None) => {
            v.check().map_err(|e| bad(video_flag(&e), e.to_string()))?;
            "--video"
        }
        (None, Some(_)) => "--page",
        (None, None) => return Ok(()),
    };
    usage(
        s.load.is_none(),
        "--duration",
        format!("{app} runs its own session; it cannot be held for a time"),
    )?;
    usage(
        s.shard.is_none(),
        "--shard",
        format!("{app} is one client's session; it cannot be sharded"),
    )?;
    let conns = match app {
        "--video" => "a video plays over one connection",
        _ => "a page opens a browser's connections: six per origin for h1, one for h2 and h3",
    };
    usage(s.connections == 1, "--connections", conns)?;
    usage(
        s.interval.is_none(),
        "--interval",
        format!("reports a load's intervals; {app} reports its own figures per run"),
    )?;
    usage(
        s.streams.is_none(),
        "--streams",
        format!("{app} decides what is in flight"),
    )?;
    usage(
        !(s.page.is_some() && s.reuse),
        "--reuse",
        "a page is loaded on fresh connections, as a browser's first visit",
    )
}
