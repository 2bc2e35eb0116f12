//! A scenario's application workloads: the `[video]` table with its `video_quality` axis,
//! and pages (`base.page`, a `page` axis) read by the caller from the scenario's directory.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{field, Scenario, ScenarioError};
use crate::spec::link::parse_duration;
use crate::spec::RunSpec;
use crate::video::{parse_bitrates, Quality, VideoSpec};

/// `[video]`: as the `--video` flags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VideoTable {
    /// The ladder, lowest first, e.g. "0.3,1,2.5,5,20mbit".
    pub bitrates: String,
    /// "abr" or one of the bitrates (the `video_quality` axis overrides it).
    pub quality: Option<String>,
    pub segment: Option<String>,
    pub length: Option<String>,
    pub start_buffer: Option<String>,
    pub max_buffer: Option<String>,
    pub watch: Option<String>,
}

impl VideoTable {
    fn spec(&self, quality: Option<&String>) -> Result<VideoSpec, ScenarioError> {
        let mut v =
            VideoSpec::new(parse_bitrates(&self.bitrates).map_err(|e| field("video.bitrates", e))?);
        if let Some(q) = quality.or(self.quality.as_ref()) {
            let f = if quality.is_some() {
                "video_quality"
            } else {
                "video.quality"
            };
            v.quality = q.parse::<Quality>().map_err(|e| field(f, e))?;
        }
        let time = |name: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|t| parse_duration(name, t).map_err(|e| field(name, e)))
                .transpose()
        };
        v.segment = time("video.segment", &self.segment)?.unwrap_or(v.segment);
        v.length = time("video.length", &self.length)?.unwrap_or(v.length);
        v.start_buffer = time("video.start_buffer", &self.start_buffer)?.unwrap_or(v.start_buffer);
        v.max_buffer = time("video.max_buffer", &self.max_buffer)?.unwrap_or(v.max_buffer);
        v.watch = time("video.watch", &self.watch)?;
        v.check().map_err(|e| match &e {
            crate::video::VideoError::Shape { field: f, .. } => field(&format!("video.{f}"), e),
            crate::video::VideoError::Quality(_) if quality.is_some() => field("video_quality", e),
            crate::video::VideoError::Quality(_) => field("video.quality", e),
            _ => field("video.bitrates", e),
        })?;
        Ok(v)
    }
}

impl Scenario {
    /// The HAR files the scenario names (relative to its own directory), for the caller to
    /// read into `pages` before `cells`.
    pub fn page_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = self.base.page.iter().cloned().collect();
        out.extend(self.axes.page.iter().flatten().cloned());
        out.sort();
        out.dedup();
        out
    }

    /// Sets a cell's video or page, which replace its objects.
    pub(super) fn apply_apps(
        &self,
        p: &BTreeMap<String, String>,
        run: &mut RunSpec,
    ) -> Result<(), ScenarioError> {
        let quality = p.get("video_quality");
        match &self.video {
            Some(t) => run.video = Some(t.spec(quality)?),
            None if quality.is_some() => {
                return Err(field("video_quality", "needs a [video] table"));
            }
            None => {}
        }
        if let Some(path) = p.get("page").or(self.base.page.as_ref()) {
            let page = self
                .pages
                .get(path)
                .ok_or_else(|| field("base.page", format!("{path} was not read")))?;
            run.page = Some(page.clone());
        }
        if run.video.is_some() && run.page.is_some() {
            return Err(field(
                "base.page",
                "one workload per cell: [video] or a page",
            ));
        }
        if run.video.is_some() || run.page.is_some() {
            if self.base.objects.is_some() || self.axes.objects.is_some() {
                return Err(field(
                    "objects",
                    "a video or a page fetches its own objects",
                ));
            }
            run.objects = None;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE6: &str = r#"
name = "t"
[base]
protos = "h2,h3"
rounds = 2
metric = "loaded"
[video]
bitrates = "0.1,20mbit"
length = "3600s"
segment = "5s"
max_buffer = "1200s"
watch = "60s"
[axes]
video_quality = ["0.1mbit", "20mbit"]
"#;

    #[test]
    fn a_video_table_and_its_quality_axis_make_the_cells() {
        let s = Scenario::parse(TABLE6).unwrap();
        let cells = s.cells().unwrap();
        assert_eq!(cells.len(), 2);
        let v = cells[1]
            .spec
            .as_compare()
            .unwrap()
            .base
            .video
            .clone()
            .unwrap();
        assert_eq!(v.quality, Quality::Fixed(crate::Rate(20_000_000)));
        assert_eq!(v.segments(), 720);
        assert_eq!(v.watch, Some(std::time::Duration::from_secs(60)));
        assert!(cells[0].spec.as_compare().unwrap().base.objects.is_none());
        assert_ne!(cells[0].hash, cells[1].hash);
    }

    #[test]
    fn bad_video_tables_name_the_key() {
        let err = |text: &str| {
            Scenario::parse(text)
                .and_then(|s| s.cells())
                .unwrap_err()
                .to_string()
        };
        assert!(err(&TABLE6.replace("\"5s\"", "\"2h\"")).starts_with("video.segment:"));
        assert!(err(&TABLE6.replace("0.1,20mbit", "20,0.1mbit")).starts_with("video.bitrates:"));
        let bad_axis = err(&TABLE6.replace("\"0.1mbit\", ", "\"5mbit\", "));
        assert!(
            bad_axis.starts_with("line ") && bad_axis.contains("video_quality:"),
            "{bad_axis}"
        );
        assert!(
            err(&TABLE6.replace("[video]", "objects = \"1x1KB\"\n[video]")).contains("objects")
        );
        let no_table = TABLE6.split("[video]").next().unwrap().to_string()
            + "[axes]\nvideo_quality = [\"abr\"]\n";
        assert!(
            err(&no_table.replace("metric = \"loaded\"\n", "")).contains("needs a [video] table")
        );
        assert!(err(&TABLE6
            .replace("[video]", "page = \"x.har\"\n[video]")
            .replace("metric = \"loaded\"", ""))
        .contains("x.har"));
    }

    #[test]
    fn pages_are_named_for_the_caller_and_must_be_read() {
        let s = Scenario::parse(
            "name = \"p\"\n[base]\nprotos = \"h1,h3\"\nrounds = 2\n[axes]\npage = [\"a.har\", \"b.har\"]\n",
        )
        .unwrap();
        assert_eq!(s.page_paths(), ["a.har", "b.har"]);
        assert!(s
            .cells()
            .unwrap_err()
            .to_string()
            .contains("a.har was not read"));
    }
}
