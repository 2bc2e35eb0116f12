//! Video streaming over one connection: what the stream is (bitrates, segments, buffer
//! limits) and how a quality is chosen. The playback model is in `video_player.rs`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::units::Rate;

mod player;
pub use player::{Next, Player, SegmentRecord, VideoReport};

/// Bitrates a ladder may hold: enough for any real encoding ladder, few enough to print.
pub const MAX_BITRATES: usize = 32;
/// Segments per video, so that a typo cannot ask for millions of requests.
pub const MAX_SEGMENTS: u64 = 100_000;
/// The longest video: a day.
pub const MAX_LENGTH: Duration = Duration::from_secs(24 * 3600);
/// Segments shorter than this are not how any streaming format cuts video.
pub const MIN_SEGMENT: Duration = Duration::from_millis(100);

/// The throughput-based choice keeps this share of the estimate as headroom (dash.js and
/// hls.js use 0.9 and 0.7-0.95): a segment must download faster than it plays.
pub const ABR_SAFETY: f64 = 0.9;
/// Segments the throughput estimate is the harmonic mean of (dash.js's sliding window is
/// 3-4): a harmonic mean is dominated by slow segments, so one lucky burst does not switch up.
pub const ABR_WINDOW: usize = 3;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VideoError {
    #[error("empty bitrate list")]
    Empty,
    #[error("`{item}`: {message}")]
    Bitrate { item: String, message: String },
    #[error("bitrates must be listed lowest first, without repeats: {before} then {after}")]
    Unsorted { before: Rate, after: Rate },
    #[error("more than {MAX_BITRATES} bitrates")]
    TooMany,
    /// `field` is the `VideoSpec` field at fault, for the caller to name its flag or key.
    #[error("{message}")]
    Shape {
        field: &'static str,
        message: String,
    },
    #[error("quality {0} is not one of the bitrates listed")]
    Quality(Rate),
}

/// Which bitrate each segment is fetched at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub enum Quality {
    /// Throughput-based: the highest bitrate below `ABR_SAFETY` of the harmonic mean of the
    /// last `ABR_WINDOW` segments' throughput; the first segment at the lowest bitrate.
    Abr,
    /// Every segment at this bitrate.
    Fixed(Rate),
}

impl FromStr for Quality {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "abr" | "auto" => Ok(Self::Abr),
            v => v
                .parse::<Rate>()
                .map(Self::Fixed)
                .map_err(|e| format!("`{s}` is not `abr` or a bitrate: {e}")),
        }
    }
}

impl TryFrom<String> for Quality {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

/// Exact, for reports: `Display` rounds a bitrate to three figures.
impl From<Quality> for String {
    fn from(q: Quality) -> Self {
        match q {
            Quality::Abr => "abr".into(),
            Quality::Fixed(r) => format!("{}bit", r.0),
        }
    }
}

impl fmt::Display for Quality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Abr => f.write_str("abr"),
            Self::Fixed(r) => write!(f, "{r}"),
        }
    }
}

/// A bitrate ladder, lowest first: `0.3,1,2.5,5,20mbit` (a bare number takes the unit of
/// the next item that has one, so one unit at the end serves the list).
pub fn parse_bitrates(s: &str) -> Result<Vec<Rate>, VideoError> {
    if s.trim().is_empty() {
        return Err(VideoError::Empty);
    }
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.len() > MAX_BITRATES {
        return Err(VideoError::TooMany);
    }
    let mut unit = String::new();
    let mut out = vec![Rate(0); items.len()];
    for (i, item) in items.iter().enumerate().rev() {
        let bad = |message: &str| VideoError::Bitrate {
            item: item.to_string(),
            message: message.into(),
        };
        if item.is_empty() {
            return Err(bad("empty item (stray comma?)"));
        }
        let digits = item
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(item.len());
        if digits < item.len() {
            unit = item[digits..].trim().to_string();
        }
        let text = if digits == item.len() {
            if unit.is_empty() {
                return Err(bad("no unit (e.g. 2.5mbit)"));
            }
            format!("{item}{unit}")
        } else {
            item.to_string()
        };
        let r: Rate = text.parse().map_err(|e| bad(&format!("{e}")))?;
        if r.0 == 0 {
            return Err(bad("a bitrate must be above zero"));
        }
        out[i] = r;
    }
    for w in out.windows(2) {
        if w[1] <= w[0] {
            return Err(VideoError::Unsorted {
                before: w[0],
                after: w[1],
            });
        }
    }
    Ok(out)
}

/// What a video session plays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VideoSpec {
    /// The encoding ladder, lowest first.
    pub bitrates: Vec<Rate>,
    pub quality: Quality,
    #[serde(rename = "segment_ms", with = "crate::serde_ms::ms")]
    #[schemars(with = "u64")]
    pub segment: Duration,
    /// The video's length: the session ends when it is all downloaded (or at `watch`).
    #[serde(rename = "length_ms", with = "crate::serde_ms::ms")]
    #[schemars(with = "u64")]
    pub length: Duration,
    /// Playback starts, and resumes after a stall, once this much video is buffered (or the
    /// whole video is).
    #[serde(rename = "start_buffer_ms", with = "crate::serde_ms::ms")]
    #[schemars(with = "u64")]
    pub start_buffer: Duration,
    /// No segment is requested while the buffer holds more than this minus one segment.
    #[serde(rename = "max_buffer_ms", with = "crate::serde_ms::ms")]
    #[schemars(with = "u64")]
    pub max_buffer: Duration,
    /// End the session this long after it started, as the paper watched one minute of an
    /// hour-long video; `None`: when the whole video is downloaded.
    #[serde(
        default,
        rename = "watch_ms",
        with = "crate::serde_ms::opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<u64>")]
    pub watch: Option<Duration>,
}

pub const DEFAULT_SEGMENT: Duration = Duration::from_secs(2);
pub const DEFAULT_LENGTH: Duration = Duration::from_secs(60);
pub const DEFAULT_START_BUFFER: Duration = Duration::from_secs(2);
pub const DEFAULT_MAX_BUFFER: Duration = Duration::from_secs(30);

impl VideoSpec {
    /// The defaults around a ladder: 2 s segments, a 60 s video, playback from 2 s of
    /// buffer, at most 30 s buffered; one bitrate is played as is, several are chosen by ABR.
    pub fn new(bitrates: Vec<Rate>) -> Self {
        let quality = match bitrates.as_slice() {
            [only] => Quality::Fixed(*only),
            _ => Quality::Abr,
        };
        Self {
            bitrates,
            quality,
            segment: DEFAULT_SEGMENT,
            length: DEFAULT_LENGTH,
            start_buffer: DEFAULT_START_BUFFER,
            max_buffer: DEFAULT_MAX_BUFFER,
            watch: None,
        }
    }

    /// Everything a session relies on; the message names the field at fault.
    pub fn check(&self) -> Result<(), VideoError> {
        self.check_ladder()?;
        self.check_segments()?;
        self.check_playback()?;
        self.check_segment_size()
    }

    /// The bitrates, and the fixed quality among them.
    fn check_ladder(&self) -> Result<(), VideoError> {
        if self.bitrates.is_empty() {
            return Err(VideoError::Empty);
        }
        if self.bitrates.len() > MAX_BITRATES {
            return Err(VideoError::TooMany);
        }
        for w in self.bitrates.windows(2) {
            if w[1] <= w[0] {
                return Err(VideoError::Unsorted {
                    before: w[0],
                    after: w[1],
                });
            }
        }
        if self.bitrates[0].0 == 0 {
            return shape("bitrates", "a bitrate must be above zero".into());
        }
        if let Quality::Fixed(r) = self.quality {
            if !self.bitrates.contains(&r) {
                return Err(VideoError::Quality(r));
            }
        }
        Ok(())
    }

    /// The video's length and how it is cut into segments.
    fn check_segments(&self) -> Result<(), VideoError> {
        if self.segment < MIN_SEGMENT {
            return shape(
                "segment",
                format!("segment {} is shorter than 100ms", show(self.segment)),
            );
        }
        if self.length.is_zero() {
            return shape("length", "the video's length must be above zero".into());
        }
        if self.length > MAX_LENGTH {
            return shape(
                "length",
                format!("length {} is longer than a day", show(self.length)),
            );
        }
        if self.segment > self.length {
            let m = format!(
                "segment {} is longer than the video ({})",
                show(self.segment),
                show(self.length)
            );
            return shape("segment", m);
        }
        if self.segments() > MAX_SEGMENTS {
            let m = format!(
                "{} segments of {} are more than {MAX_SEGMENTS}",
                self.segments(),
                show(self.segment)
            );
            return shape("segment", m);
        }
        Ok(())
    }

    /// The buffer limits and how long the session is watched.
    fn check_playback(&self) -> Result<(), VideoError> {
        if self.max_buffer < self.segment {
            let m = format!(
                "max buffer {} holds less than one segment ({})",
                show(self.max_buffer),
                show(self.segment)
            );
            return shape("max_buffer", m);
        }
        if self.start_buffer > self.max_buffer {
            let m = format!(
                "start buffer {} is more than the max buffer ({})",
                show(self.start_buffer),
                show(self.max_buffer)
            );
            return shape("start_buffer", m);
        }
        if self.watch == Some(Duration::ZERO) {
            return shape("watch", "watch must be longer than zero".into());
        }
        if self.watch.is_some_and(|w| w > MAX_LENGTH) {
            return shape("watch", "watch is longer than a day".into());
        }
        Ok(())
    }

    /// The largest segment must fit in one object a qbench server sends.
    fn check_segment_size(&self) -> Result<(), VideoError> {
        let top = *self
            .bitrates
            .last()
            .expect("check_ladder ran first: not empty");
        if self.segment_bytes(0, top) > crate::wire::MAX_OBJECT {
            let m = format!(
                "a {} segment at {top} is more than the 10 GB a qbench server sends as one object",
                show(self.segment)
            );
            return shape("bitrates", m);
        }
        Ok(())
    }

    pub fn segments(&self) -> u64 {
        let (l, s) = (self.length.as_micros(), self.segment.as_micros().max(1));
        u64::try_from(l.div_ceil(s)).unwrap_or(u64::MAX)
    }

    /// Segment `i`'s play time: the last one holds what is left of the video.
    pub fn segment_length(&self, i: u64) -> Duration {
        let start = self
            .segment
            .saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
        self.length.saturating_sub(start).min(self.segment)
    }

    /// Bytes of segment `i` at `rate` (at least one).
    pub fn segment_bytes(&self, i: u64, rate: Rate) -> u64 {
        let bits = rate.0 as f64 * self.segment_length(i).as_secs_f64();
        ((bits / 8.0).round() as u64).max(1)
    }

    /// The bitrate (index into `bitrates`) for the next segment, given the throughput of the
    /// segments so far in bit/s, oldest first.
    pub fn choose(&self, throughputs: &[f64]) -> usize {
        match self.quality {
            Quality::Fixed(r) => self.bitrates.iter().position(|b| *b == r).unwrap_or(0),
            Quality::Abr => {
                let recent = &throughputs[throughputs.len().saturating_sub(ABR_WINDOW)..];
                if recent.is_empty() || recent.iter().any(|t| t.is_nan() || *t <= 0.0) {
                    return 0;
                }
                let harmonic = recent.len() as f64 / recent.iter().map(|t| 1.0 / t).sum::<f64>();
                let budget = harmonic * ABR_SAFETY;
                self.bitrates
                    .iter()
                    .rposition(|b| b.0 as f64 <= budget)
                    .unwrap_or(0)
            }
        }
    }
}

/// A fault in the spec's shape: `field` is the one to name.
fn shape(field: &'static str, message: String) -> Result<(), VideoError> {
    Err(VideoError::Shape { field, message })
}

fn show(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests;
