//! The playback-buffer model a video session runs by: sans-IO, fed the times segments were
//! requested and finished, so a known download trace gives known stalls.
//!
//! Playback starts once `start_buffer` of video is buffered (or the whole video is), plays
//! at real time, stalls when the buffer runs dry (a rebuffer) and resumes once
//! `start_buffer` is buffered again. Segments are fetched one at a time; while playing, none is
//! requested while the buffer holds more than `max_buffer` minus that segment (before playback
//! starts and during a stall, the buffer may pass that by at most the one segment fetched).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::VideoSpec;
use crate::histogram::{HistogramExport, LatencyHistogram};

/// What the session does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Fetch segment `index` at `bitrate` (an index into the ladder): `bytes` long.
    Fetch {
        index: u64,
        bitrate: usize,
        bytes: u64,
    },
    /// The buffer is full: ask again at this time.
    Wait(Duration),
    /// Every segment is downloaded, or the watch time is over.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Startup,
    Playing,
    Stalled { since: Duration },
    Ended,
}

/// One segment as it was fetched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SegmentRecord {
    pub index: u64,
    pub bitrate_bps: u64,
    pub bytes: u64,
    /// Requested and fully received, from the session's start.
    pub requested_us: u64,
    pub done_us: u64,
}

/// The session's quality of experience, as IMC'17 Table 6 reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VideoReport {
    /// Session start (before connecting) to playback start; `None` if it never started.
    pub time_to_start_us: Option<u64>,
    /// Stalls after playback started.
    pub rebuffers: u32,
    /// Time spent stalled, an unfinished stall included.
    pub rebuffer_us: u64,
    /// Video played and video downloaded, in microseconds of video.
    pub played_us: u64,
    pub loaded_us: u64,
    /// Video downloaded over the video's length.
    pub loaded_fraction: f64,
    /// Stalled time over played time (IMC'17's "Buffer/Play Time"); `None` before any play.
    pub rebuffer_ratio: Option<f64>,
    /// Stalls per second of video played.
    pub rebuffers_per_played_s: Option<f64>,
    /// Mean of the segments' bitrates, weighted by their play time.
    pub mean_bitrate_bps: Option<f64>,
    /// Times consecutive segments differ in bitrate.
    pub switches: u32,
    /// Session start to the end of playback (or of the watch time).
    pub session_us: u64,
    /// Every segment was downloaded (or the watch time ended the session) without an error.
    pub complete: bool,
    /// Request to last byte of each segment.
    pub segment_download: HistogramExport,
    pub segments: Vec<SegmentRecord>,
}

/// One session's player; every time is an offset on the run's monotonic clock.
#[derive(Debug)]
pub struct Player {
    spec: VideoSpec,
    start: Duration,
    /// The time the state was last advanced to.
    at: Duration,
    buffered: Duration,
    position: Duration,
    state: State,
    started: Option<Duration>,
    rebuffers: u32,
    rebuffer_time: Duration,
    next_segment: u64,
    pending: Option<(u64, usize, u64, Duration)>,
    throughputs: Vec<f64>,
    segments: Vec<SegmentRecord>,
    download: LatencyHistogram,
    failed: bool,
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Player {
    /// `spec` must have passed `VideoSpec::check`; `start` is when the session began.
    pub fn new(spec: VideoSpec, start: Duration) -> Self {
        Self {
            spec,
            start,
            at: start,
            buffered: Duration::ZERO,
            position: Duration::ZERO,
            state: State::Startup,
            started: None,
            rebuffers: 0,
            rebuffer_time: Duration::ZERO,
            next_segment: 0,
            pending: None,
            throughputs: Vec::new(),
            segments: Vec::new(),
            download: LatencyHistogram::new(),
            failed: false,
        }
    }

    pub fn spec(&self) -> &VideoSpec {
        &self.spec
    }

    /// When the watch time ends the session, if it does.
    pub fn watch_end(&self) -> Option<Duration> {
        self.spec.watch.map(|w| self.start.saturating_add(w))
    }

    /// Plays from the last time the state was advanced to until `now`.
    fn advance(&mut self, now: Duration) {
        let now = now.max(self.at);
        if self.state == State::Playing {
            let left = self.buffered.saturating_sub(self.position);
            let dt = now - self.at;
            if dt >= left && self.all_loaded() {
                self.position = self.buffered;
                self.state = State::Ended;
            } else if dt > left {
                // A segment that lands the instant the buffer runs dry is no stall.
                self.position = self.buffered;
                self.rebuffers += 1;
                self.state = State::Stalled {
                    since: self.at + left,
                };
            } else {
                self.position += dt;
            }
        }
        self.at = now;
    }

    fn all_loaded(&self) -> bool {
        self.buffered >= self.spec.length
    }

    /// Starts or resumes playback if enough is buffered.
    fn maybe_play(&mut self, now: Duration) {
        let level = self.buffered.saturating_sub(self.position);
        let enough = level >= self.spec.start_buffer || self.all_loaded();
        match self.state {
            State::Startup if enough => {
                self.state = State::Playing;
                self.started = Some(now);
            }
            State::Stalled { since } if enough => {
                self.rebuffer_time += now.saturating_sub(since);
                self.state = State::Playing;
            }
            _ => {}
        }
    }

    /// What to do at `now`. A `Fetch` is taken as requested at `now`: report its end with
    /// `downloaded` or `failed` before asking again.
    pub fn next(&mut self, now: Duration) -> Next {
        self.advance(now);
        let watch_over = self.watch_end().is_some_and(|end| now >= end);
        if self.failed || watch_over || self.next_segment >= self.spec.segments() {
            return Next::Done;
        }
        if let Some((index, bitrate, bytes, _)) = self.pending {
            return Next::Fetch {
                index,
                bitrate,
                bytes,
            };
        }
        let index = self.next_segment;
        if self.state == State::Playing {
            let level = self.buffered - self.position;
            let room = self
                .spec
                .max_buffer
                .saturating_sub(self.spec.segment_length(index));
            if level > room {
                let at = now + (level - room);
                return Next::Wait(self.watch_end().map_or(at, |end| at.min(end)));
            }
        }
        let bitrate = self.spec.choose(&self.throughputs);
        let bytes = self.spec.segment_bytes(index, self.spec.bitrates[bitrate]);
        self.pending = Some((index, bitrate, bytes, now));
        Next::Fetch {
            index,
            bitrate,
            bytes,
        }
    }

    /// The requested segment's last byte arrived at `now`.
    pub fn downloaded(&mut self, now: Duration) {
        let Some((index, bitrate, bytes, requested)) = self.pending.take() else {
            return;
        };
        self.advance(now);
        let took = now.saturating_sub(requested);
        self.download.record(took);
        if took > Duration::ZERO {
            self.throughputs
                .push(bytes as f64 * 8.0 / took.as_secs_f64());
        } else {
            self.throughputs.push(f64::INFINITY);
        }
        self.segments.push(SegmentRecord {
            index,
            bitrate_bps: self.spec.bitrates[bitrate].0,
            bytes,
            requested_us: us(requested.saturating_sub(self.start)),
            done_us: us(now.saturating_sub(self.start)),
        });
        self.buffered = (self.buffered + self.spec.segment_length(index)).min(self.spec.length);
        self.next_segment = index + 1;
        self.maybe_play(now);
    }

    /// The requested segment failed at `now`: the session ends there.
    pub fn failed(&mut self, now: Duration) {
        self.advance(now);
        self.pending = None;
        self.failed = true;
    }

    /// The session's figures at `now`. Once every segment is downloaded, the rest of the
    /// playback cannot stall, so it is played out here instead of waited for.
    pub fn finish(mut self, now: Duration) -> VideoReport {
        let watch_end = self.watch_end();
        let end = match watch_end {
            Some(w) => now.min(w).max(self.at),
            None => now.max(self.at),
        };
        self.advance(end);
        // Everything downloaded: playback goes on without a stall, to the video's end or
        // the watch time, whichever comes first.
        let mut session_end = end;
        if self.all_loaded() && !self.failed && self.state == State::Playing {
            let played_out = end + (self.buffered - self.position);
            session_end = watch_end.map_or(played_out, |w| played_out.min(w.max(end)));
            self.advance(session_end);
        }
        if let State::Stalled { since } = self.state {
            self.rebuffer_time += session_end.saturating_sub(since);
        }
        let played = self.position;
        let played_s = played.as_secs_f64();
        let weights: f64 = self
            .segments
            .iter()
            .map(|s| self.spec.segment_length(s.index).as_secs_f64())
            .sum();
        let mean_bitrate_bps = (weights > 0.0).then(|| {
            self.segments
                .iter()
                .map(|s| s.bitrate_bps as f64 * self.spec.segment_length(s.index).as_secs_f64())
                .sum::<f64>()
                / weights
        });
        let switches = self
            .segments
            .windows(2)
            .filter(|w| w[0].bitrate_bps != w[1].bitrate_bps)
            .count() as u32;
        let complete = !self.failed && (self.all_loaded() || watch_end.is_some_and(|w| end >= w));
        VideoReport {
            time_to_start_us: self.started.map(|s| us(s.saturating_sub(self.start))),
            rebuffers: self.rebuffers,
            rebuffer_us: us(self.rebuffer_time),
            played_us: us(played),
            loaded_us: us(self.buffered),
            loaded_fraction: self.buffered.as_secs_f64() / self.spec.length.as_secs_f64(),
            rebuffer_ratio: (played_s > 0.0).then(|| self.rebuffer_time.as_secs_f64() / played_s),
            rebuffers_per_played_s: (played_s > 0.0).then(|| f64::from(self.rebuffers) / played_s),
            mean_bitrate_bps,
            switches,
            session_us: us(session_end.saturating_sub(self.start)),
            complete,
            segment_download: HistogramExport::from(&self.download),
            segments: self.segments,
        }
    }
}
