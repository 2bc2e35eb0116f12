//! What a single benchmark shows while it runs: a progress bar, or each interval as a line,
//! a `--json-stream` object, served metrics (`--metrics-listen`) and the live view (`--tui`),
//! all fed from the same interval records with the index of the run they belong to.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use anyhow::Context;

use qbench_core::report::load::IntervalRecord;
use qbench_core::spec::RunSpec;
use qbench_engine::cpu::BusiestThread;
use qbench_engine::observe::{Observer, Observing, Started};

use super::live_view::View;
use super::metrics::{Labels, Metrics};
use super::progress::Progress;
use super::stream::IntervalOut;
use super::tui::Screen;

/// A held load's bar counts time; a workload of known sizes, payload bytes; any other
/// (URLs, a page, a video), objects.
pub fn progress(s: &Started<'_>) -> Progress {
    let spec = s.spec;
    let runs = u64::from(spec.runs);
    match (&spec.load, spec.interval) {
        // Interval lines, or the view, are the live view.
        (_, Some(_)) => Progress::hidden(),
        (Some(l), None) => Progress::time((l.duration.as_millis() as u64).saturating_mul(runs)),
        (None, None) => match expected_bytes(spec, s.objects) {
            Some(b) => Progress::bytes(b.saturating_mul(runs), s.objects * runs),
            None => Progress::objects(s.objects * runs),
        },
    }
}

/// The payload bytes a run of `objects` of `spec`'s workload brings, when its sizes are known:
/// a shard's share of the whole in proportion to its objects.
pub fn expected_bytes(spec: &RunSpec, objects: u64) -> Option<u64> {
    if spec.page.is_some() || spec.video.is_some() {
        return None;
    }
    let w = spec.objects.as_ref()?;
    let (bytes, all) = (w.total_bytes(), w.total_objects());
    match all {
        0 => None,
        n if n == objects => Some(bytes),
        n => Some((bytes as f64 * objects as f64 / n as f64) as u64),
    }
}

/// Told of each interval, with the index of the run it belongs to.
type Feed = Box<dyn Fn(u32, &IntervalRecord) + Send + Sync>;

/// What the user is shown of a command while it runs, as the engine reports it: progress on
/// the command's bar, intervals to the live outputs, warnings on stderr.
#[derive(Default)]
struct Watch {
    bar: RwLock<Option<Progress>>,
    intervals: RwLock<Option<Feed>>,
}

impl Observer for Watch {
    fn advanced(&self, n: u64) {
        if let Some(bar) = &*self.bar.read().unwrap_or_else(PoisonError::into_inner) {
            bar.advanced(n);
        }
    }

    fn interval(&self, run: u32, r: &IntervalRecord) {
        let feed = self
            .intervals
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(feed) = &*feed {
            feed(run, r);
        }
    }

    fn warn(&self, line: &str) {
        crate::tell!("{line}");
    }

    fn note(&self, line: &str) {
        crate::tell!("{line}");
    }
}

/// A command's [`Watch`], and the engine's handle on it: one per command, shared by a
/// sweep's cells, so that a warning said once is said once in all of them.
#[derive(Clone)]
pub struct Watching {
    watch: Arc<Watch>,
    observing: Observing,
}

impl Default for Watching {
    fn default() -> Self {
        let watch = Arc::new(Watch::default());
        let observing = Observing::new(watch.clone());
        Self { watch, observing }
    }
}

impl Watching {
    /// What the engine reports the command's runs to.
    pub fn observer(&self) -> &Observing {
        &self.observing
    }

    /// From now on the runs' progress moves `bar`.
    pub fn show(&self, bar: &Progress) {
        *self
            .watch
            .bar
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(bar.clone());
    }

    fn feed(&self, feed: Option<Feed>) {
        *self
            .watch
            .intervals
            .write()
            .unwrap_or_else(PoisonError::into_inner) = feed;
    }
}

/// The running outputs: the metrics endpoint, served until dropped; the live view, on the
/// terminal until closed. The intervals feed them until this is dropped.
pub struct LiveOutputs {
    watching: Watching,
    metrics: Option<(Arc<Metrics>, AbortOnDrop)>,
    screen: Mutex<Option<Arc<Screen>>>,
}

impl LiveOutputs {
    /// Starts what the `started` side's intervals, as `watching` is told of them, feed.
    /// `view`: the live view's title, when it is shown.
    pub async fn start(
        started: &Started<'_>,
        watching: &Watching,
        json_stream: Option<&str>,
        print: bool,
        metrics_at: Option<std::net::SocketAddr>,
        view: Option<String>,
    ) -> anyhow::Result<Self> {
        let metrics = match metrics_at {
            Some(addr) => Some(serve_metrics(started, addr).await?),
            None => None,
        };
        let spec = started.spec;
        let out = IntervalOut::open(json_stream, spec.interval.unwrap_or_default(), print)?;
        let screen = match view {
            Some(title) => Some(Arc::new(Screen::start(View::new(
                title,
                spec.runs,
                spec.load.as_ref().map(|l| l.duration),
            ))?)),
            None => None,
        };
        // Only what is shown or served needs the threads' CPU read each interval.
        let busiest =
            (metrics.is_some() || screen.is_some()).then(|| Mutex::new(BusiestThread::start()));
        let (m, s) = (metrics.as_ref().map(|m| m.0.clone()), screen.clone());
        watching.feed(Some(Box::new(move |run, r| {
            let busy = busiest
                .as_ref()
                .and_then(|b| b.lock().unwrap_or_else(PoisonError::into_inner).sample());
            if let Some(m) = &m {
                m.add(run, r, busy.clone());
            }
            if let Some(s) = &s {
                s.add(run, r, busy);
            }
            out.emit(run, r)
        })));
        Ok(Self {
            watching: watching.clone(),
            metrics,
            screen: Mutex::new(screen),
        })
    }

    /// Gives the terminal back, with the lines kept from it, before the summary is printed.
    /// The view closes when the last holder lets go: the intervals' feed holds it until this
    /// is dropped, so it is told to stop here.
    pub fn close_view(&self) {
        let taken = self
            .screen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(s) = taken {
            s.close();
        }
    }

    /// The metrics endpoint, whose final scrape is waited for after the last run (see
    /// `Metrics::final_scrape`).
    pub fn metrics(&self) -> Option<Arc<Metrics>> {
        self.metrics.as_ref().map(|(m, _)| m.clone())
    }
}

/// `--metrics-listen`: the endpoint, served until the returned guard is dropped.
async fn serve_metrics(
    started: &Started<'_>,
    addr: std::net::SocketAddr,
) -> anyhow::Result<(Arc<Metrics>, AbortOnDrop)> {
    let listener = super::metrics::bind(addr).await?;
    // Port 0 asks for any free port: the one taken is said, or nobody could scrape it.
    let at = listener
        .local_addr()
        .context("--metrics-listen: the address bound")?;
    crate::tell!("--metrics-listen: serving http://{at}/metrics");
    if !at.ip().is_loopback() {
        crate::tell!(
            "warning: --metrics-listen {at} is not a loopback address: whoever reaches this host can read the run's counts, its host name and process id"
        );
    }
    let spec = started.spec;
    let env = &started.meta.environment;
    let labels = Labels {
        proto: spec.proto.to_string(),
        shard: spec
            .shard
            .map_or("0/1".into(), |s| format!("{}/{}", s.index, s.count)),
        run_id: format!(
            "{}-{}-{}",
            env.hostname.as_deref().unwrap_or("host"),
            std::process::id(),
            started.meta.started_at
        ),
    };
    let m = Metrics::new(labels);
    let task = tokio::spawn(m.clone().serve(listener));
    Ok((m, AbortOnDrop(task)))
}

impl Drop for LiveOutputs {
    /// The outputs' files and endpoint go with the run, as they did before the watch.
    fn drop(&mut self) {
        self.watching.feed(None);
    }
}

/// Stops the metrics endpoint with the run.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
