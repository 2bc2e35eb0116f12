//! `qbench compete`: flows of several protocols at once through one bottleneck, each on its
//! own connection to its own in-process server: per-flow goodput, per-flow throughput over
//! time (from the servers' byte counters) and Jain's fairness index.

use std::sync::{Arc, Mutex, PoisonError};

use qbench_core::report::compete::CompeteReport;
use qbench_engine::observe::{Later, Presenter, Started};
use qbench_engine::CompetePlan;

use crate::export::live_outputs::Watching;
use crate::export::progress::Progress;
use crate::export::{print_text, write_json, Dest};
use crate::flags::cli::{CompeteArgs, Outputs};
use qbench_engine::error::usage;

pub fn compete(args: CompeteArgs) -> anyhow::Result<()> {
    args.run.load.check(args.run.json_stream.is_some())?;
    args.run
        .apps
        .check(args.run.objects.is_some(), !args.run.urls.is_empty())?;
    usage(
        args.run.apps.video.is_none() && args.run.apps.page.is_none(),
        if args.run.apps.video.is_some() {
            "--video"
        } else {
            "--page"
        },
        "compete runs flows of --objects at once; compare sessions with `qbench compare`",
    )?;
    args.run.fleet.refuse("compete")?;
    args.run.refuse_single_benchmark_outputs("compete")?;
    usage(
        args.run.plot.is_none() && args.run.state_graph.is_none(),
        "--plot",
        "(and --state-graph) draw one flow at a time with `qbench`",
    )?;
    usage(
        args.run.load.duration.is_none()
            && args.run.load.interval.is_none()
            && args.run.json_stream.is_none(),
        "--duration",
        "competing flows each fetch --objects once",
    )?;
    let mut plan = CompetePlan::new(&args.spec(), &args.run.target(), args.run.link_choice())?;
    plan.command = std::env::args().collect();
    let outputs: Outputs = args.run.outputs();
    args.run.check_outputs()?;
    let key_log = qbench_engine::tls::open_key_log(args.run.keylog.as_deref())?;
    for (_, cfg) in &mut plan.flows {
        cfg.key_log.clone_from(&key_log);
    }
    let json = outputs.json.as_deref().map(Dest::parse);
    let out = run_blocking(&plan, json.as_ref(), &Watching::default())?;
    if let Some(dest) = &json {
        write_json(dest, &out)?;
    }
    anyhow::ensure!(out.complete, "some flows did not complete");
    qbench_engine::files::check_key_log(&crate::console::Stderr, key_log.as_deref());
    Ok(())
}

/// Runs all flows at once through the engine, the bar counting their objects; prints the
/// summary (to stderr when the JSON goes to stdout) and returns the report.
pub fn run_blocking(
    plan: &CompetePlan,
    json: Option<&Dest>,
    watching: &Watching,
) -> anyhow::Result<CompeteReport> {
    let out = qbench_engine::compete(plan, &observing(watching))?;
    print_text(&summary(plan, &out), json);
    Ok(out)
}

/// The handle a competition runs with: its bar on `watching`'s terminal.
pub fn observing(watching: &Watching) -> qbench_engine::observe::Observing {
    let shown = Arc::new(CompeteShown {
        watching: watching.clone(),
        bar: Mutex::new(None),
    });
    watching.observer().presenting(shown)
}

/// Each flow's goodput and Jain's index, as lines.
pub fn summary(plan: &CompetePlan, out: &CompeteReport) -> String {
    let mut text = format!(
        "qbench compete: {} flows through {}\n",
        out.flows.len(),
        plan.link_text
    );
    for f in &out.flows {
        text.push_str(&format!(
            "  {:<10} {}\n",
            f.label,
            f.goodput_bps
                .map_or("-".into(), |g| format!("{:.2} Mbit/s", g / 1e6))
        ));
    }
    text.push_str(&format!(
        "  Jain's index {}\n",
        out.jain_index.map_or("-".into(), |j| format!("{j:.3}"))
    ));
    text
}

/// What a competition shows while its flows run: one bar counting all their objects.
struct CompeteShown {
    watching: Watching,
    bar: Mutex<Option<Progress>>,
}

impl CompeteShown {
    fn bar(&self) -> std::sync::MutexGuard<'_, Option<Progress>> {
        self.bar.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Presenter for CompeteShown {
    fn started<'a>(&'a self, flows: &'a [Started<'a>]) -> Later<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let bar = Progress::objects(flows.iter().map(|f| f.objects).sum());
            self.watching.show(&bar);
            *self.bar() = Some(bar);
            Ok(())
        })
    }

    fn ended(&self) {
        if let Some(bar) = self.bar().as_ref() {
            bar.finish_and_clear();
        }
    }
}
