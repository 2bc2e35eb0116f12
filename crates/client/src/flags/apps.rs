//! The application workloads' flags: a video session (`--video`) and a page replayed from a
//! HAR file (`--page`), instead of `--objects`.

use std::path::Path;
use std::time::Duration;

use clap::Args;
use qbench_core::page::PageProfile;
use qbench_core::report::page::PageSpec;
use qbench_core::video::{parse_bitrates, Quality, VideoSpec};
use qbench_core::Rate;

use qbench_engine::error::{usage, ConfigError};

/// Largest HAR file read: real pages' HARs are a few MB (bodies omitted); this bounds the
/// memory a wrong file can take.
pub use qbench_core::spec::input::MAX_HAR_BYTES;

/// A bitrate ladder as one flag value.
#[derive(Debug, Clone, PartialEq)]
pub struct Ladder(pub Vec<Rate>);

fn parse_ladder(s: &str) -> Result<Ladder, String> {
    parse_bitrates(s).map(Ladder).map_err(|e| e.to_string())
}

fn parse_page(s: &str) -> Result<PageSpec, String> {
    read_page(Path::new(s), s)
}

/// Reads and parses a HAR file, named `name` in reports (the path as the user wrote it: on
/// the command line, or relative to a scenario file); the error names the file (and the
/// entry, where there is one).
pub fn read_page(path: &Path, name: &str) -> Result<PageSpec, String> {
    let shown = path.display();
    // The limit holds while reading: a FIFO or /dev/zero states no size.
    let text = qbench_engine::files::read_text(path, MAX_HAR_BYTES, "a HAR file")?;
    let profile = PageProfile::from_har(&text).map_err(|e| format!("{shown}: {e}"))?;
    Ok(PageSpec {
        name: name.to_string(),
        profile,
    })
}

#[derive(Debug, Clone, Default, Args)]
pub struct AppArgs {
    /// Play a video over one connection instead of fetching --objects: its bitrate ladder,
    /// lowest first, e.g. 0.3,1,2.5,5,20mbit (one bitrate: a fixed quality). Segments are
    /// fetched one at a time, at playback pace once the buffer is full
    #[arg(long, value_name = "BITRATES", value_parser = parse_ladder)]
    pub video: Option<Ladder>,

    /// `abr` (the highest bitrate under 0.9 of the harmonic mean of the last 3 segments'
    /// throughput) or one of the --video bitrates [default: abr, or the only bitrate]
    #[arg(long, value_name = "abr|BITRATE")]
    pub video_quality: Option<Quality>,

    /// With --video: each segment's play time [default: 2s]
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub segment: Option<Duration>,

    /// With --video: the video's length [default: 60s]
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub length: Option<Duration>,

    /// With --video: playback starts, and resumes after a stall, once this much is buffered
    /// [default: 2s]
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub start_buffer: Option<Duration>,

    /// With --video: no segment is requested while more than this minus one segment is
    /// buffered [default: 30s]
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub max_buffer: Option<Duration>,

    /// With --video: end the session this long after it starts (e.g. one minute of a long
    /// video) [default: when the whole video is downloaded]
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub watch: Option<Duration>,

    /// Replay the page recorded in this HAR file instead of fetching --objects: its objects'
    /// sizes from qbench-server, each once its parent has arrived, one origin per host (six
    /// connections each for h1, one for h2/h3)
    #[arg(long, value_name = "FILE.har", value_parser = parse_page)]
    pub page: Option<PageSpec>,
}

impl AppArgs {
    /// Flags that refine --video without it, and workloads given twice, in one line each.
    pub fn check(&self, objects: bool, urls: bool) -> Result<(), ConfigError> {
        let video = self.video.is_some();
        for (flag, given) in [
            ("--video-quality", self.video_quality.is_some()),
            ("--segment", self.segment.is_some()),
            ("--length", self.length.is_some()),
            ("--start-buffer", self.start_buffer.is_some()),
            ("--max-buffer", self.max_buffer.is_some()),
            ("--watch", self.watch.is_some()),
        ] {
            usage(video || !given, flag, "needs --video")?;
        }
        for (flag, given) in [("--video", video), ("--page", self.page.is_some())] {
            usage(
                !(given && objects),
                flag,
                "fetches its own objects: drop --objects",
            )?;
            usage(
                !(given && urls),
                flag,
                "fetches from a qbench server's /bytes/{n}: drop --url",
            )?;
        }
        usage(
            !(video && self.page.is_some()),
            "--page",
            "one workload per run: --video or --page",
        )
    }

    /// The video these flags describe; checked with the rest of the spec.
    pub fn video(&self) -> Option<VideoSpec> {
        let ladder = self.video.as_ref()?;
        let mut v = VideoSpec::new(ladder.0.clone());
        if let Some(q) = self.video_quality {
            v.quality = q;
        }
        v.segment = self.segment.unwrap_or(v.segment);
        v.length = self.length.unwrap_or(v.length);
        v.start_buffer = self.start_buffer.unwrap_or(v.start_buffer);
        v.max_buffer = self.max_buffer.unwrap_or(v.max_buffer);
        v.watch = self.watch;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qbench_core::spec::RunSpec;
    use qbench_engine::plan::check_apps as check;

    #[test]
    fn video_flags_fill_the_defaults() {
        let a = AppArgs {
            video: Some(parse_ladder("1,5mbit").unwrap()),
            watch: Some(Duration::from_secs(20)),
            ..Default::default()
        };
        let v = a.video().unwrap();
        assert_eq!(v.quality, Quality::Abr);
        assert_eq!(v.watch, Some(Duration::from_secs(20)));
        assert_eq!(v.segment, qbench_core::video::DEFAULT_SEGMENT);
        assert!(a.check(false, false).is_ok());
        assert_eq!(a.check(true, false).unwrap_err().flag, "--video");
    }

    #[test]
    fn refinements_need_their_flag() {
        let a = AppArgs {
            segment: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        let e = a.check(false, false).unwrap_err();
        assert_eq!((e.flag, e.message.as_str()), ("--segment", "needs --video"));
    }

    #[test]
    fn spec_checks_name_the_flag() {
        let mut s = RunSpec {
            objects: None,
            video: AppArgs {
                video: Some(parse_ladder("1mbit").unwrap()),
                segment: Some(Duration::from_secs(90)),
                ..Default::default()
            }
            .video(),
            ..Default::default()
        };
        assert_eq!(check(&s).unwrap_err().flag, "--segment");
        s.video.as_mut().unwrap().segment = Duration::from_secs(2);
        s.connections = 2;
        assert_eq!(check(&s).unwrap_err().flag, "--connections");
    }
}
