//! A comparison's rounds: the warm-up, then round after round with each side first in turn,
//! until `--rounds`, the auto rule or a stopping signal ends them; noisy rounds dropped and run
//! again, the link measured again between rounds, the report so far rewritten after each.

use std::sync::atomic::{AtomicBool, Ordering};

use qbench_core::report::compare::{AutoRoundsRecord, CompareReport, DiscardedRound, Warmup};
use qbench_core::stats::rounds::Stopped;

use super::compare_plan::ComparePlan;
use super::side::Side;
use crate::observe::{Document, Observer, Observing, Presenter, Stage, Written};
use crate::signals::{self, Interrupted};

/// The rounds as they went: the warm-up, which side went first in each round kept, why they
/// ended early, and the noisy rounds dropped and run again.
#[derive(Default)]
pub(super) struct Rounds {
    warmup: Warmup,
    first: Vec<String>,
    stopped: Option<Stopped>,
    pub(super) aborted: Option<String>,
    discarded: Vec<DiscardedRound>,
}

impl Rounds {
    /// The report of the rounds so far, or of all of them once they ended.
    pub(super) fn report(
        &self,
        plan: &ComparePlan,
        a: &Side<'_>,
        b: &Side<'_>,
    ) -> anyhow::Result<CompareReport> {
        let done = self.first.len();
        // With --rounds auto the rounds planned are the ones run so far, once the rule stops.
        let planned = match plan.auto {
            Some(_) if self.stopped.is_some() => done,
            _ => plan.rounds as usize,
        };
        let mut r = CompareReport::new(
            done as u32,
            plan.labels.clone(),
            self.first.clone(),
            (
                a.report(planned, self.aborted.clone())?,
                b.report(planned, self.aborted.clone())?,
            ),
            (plan.metric, plan.test),
        );
        r.auto_rounds = plan.auto.map(|rule| AutoRoundsRecord {
            rule,
            stopped: self.stopped,
        });
        r.aborted.clone_from(&self.aborted);
        r.discarded.clone_from(&self.discarded);
        r.warmup.clone_from(&self.warmup);
        r.thresholds =
            qbench_core::report::compare::judge_comparison(&plan.thresholds, &r.comparison);
        Ok(r)
    }
}

impl Rounds {
    /// Drops round `round` from both sides and the record when either side's run was noisy,
    /// saying why; whether it did.
    fn drop_noisy(
        &mut self,
        round: u32,
        (a, b): (&mut Side<'_>, &mut Side<'_>),
        observer: &Observing,
    ) -> bool {
        let Some(n) = noisy(a, b) else {
            return false;
        };
        let why: Vec<String> = n.causes.iter().map(ToString::to_string).collect();
        observer.note(&format!(
            "round {round}: {}, dropped and run again",
            why.join(", ")
        ));
        a.discard_last();
        b.discard_last();
        self.first.pop();
        self.discarded.push(DiscardedRound {
            round,
            steal_pct: n.steal_pct,
            causes: n.causes,
        });
        true
    }
}

/// Why the two sides' last runs were noisy, when either was.
fn noisy(a: &Side<'_>, b: &Side<'_>) -> Option<qbench_core::stats::noise::NoisyRound> {
    let last = |s: &Side<'_>| s.runs.last().and_then(|r| r.noise.as_ref()).cloned();
    qbench_core::stats::noise::noisy_round(&[last(a), last(b)])
}

/// Round after round, each side first in turn, until `--rounds`, the auto rule, or a stopping
/// signal ends them; the report so far is handed over after every round.
pub(super) async fn run_rounds(
    plan: &ComparePlan,
    a: &mut Side<'_>,
    b: &mut Side<'_>,
    observer: &Observing,
    rounds_started: &AtomicBool,
) -> anyhow::Result<Rounds> {
    let mut rounds = Rounds::default();
    // A stopping signal ends the rounds; the report still comes, `aborted` naming it.
    let mut listener = signals::Listener::new();
    rounds_started.store(true, Ordering::Relaxed);
    let both = (&mut *a, &mut *b);
    if let Some(sig) = warm_up(plan, both, observer, &mut listener, &mut rounds.warmup).await {
        rounds.aborted = Some(Interrupted::new(sig, "during the warm-up").to_string());
        return Ok(rounds);
    }
    // The warm-up shows whose clock each side's times are (a program that prints no times of
    // its own is timed by the server): sides timed at different places are not compared.
    // A failed run may have fallen back to the server's view; the verdict then says so.
    let w = &rounds.warmup;
    let whole = w.a.iter().chain(&w.b).all(|r| r.complete);
    if let Some(why) = qbench_core::report::clocks::mismatch(&w.a, &w.b).filter(|_| whole) {
        anyhow::bail!("--a.client, --b.client: the warm-up round says {why}");
    }
    let mut round = 0;
    while round < plan.rounds {
        if plan.recalibrate && round > 0 {
            let strict = plan.a.link_options.as_ref().is_some_and(|o| o.strict);
            let why = super::recalibrate::recalibrate(strict, a, round, observer).await;
            if let Some(why) = why {
                rounds.aborted = Some(why);
                break;
            }
        }
        let a_first = round % 2 == 0;
        rounds
            .first
            .push(if a_first { "a" } else { "b" }.to_string());
        let stage = |side| Stage::Round {
            round,
            of: plan.rounds,
            label: plan.label(side),
            side,
        };
        let both = (&mut *a, &mut *b);
        if let Some(sig) = run_round(round, &stage, a_first, both, observer, &mut listener).await {
            rounds.aborted =
                Some(Interrupted::new(sig, format!("during round {round}")).to_string());
            drop_half_round(a, b);
            rounds.first.pop();
            break;
        }
        let may_drop = plan.discard_noisy && rounds.discarded.len() < plan.rounds as usize;
        if may_drop && rounds.drop_noisy(round, (&mut *a, &mut *b), observer) {
            continue;
        }
        round += 1;
        if let Some(rule) = plan.auto {
            let so_far = rounds.report(plan, a, b)?;
            rounds.stopped = rule.check(round, so_far.comparison.effect.as_ref());
        }
        if rounds.stopped.is_some() {
            break;
        }
        if observer.wants_so_far() {
            let so_far = rounds.report(plan, a, b)?;
            observer.report(Written::SoFar, Document::Compare(&so_far))?;
        }
    }
    Ok(rounds)
}

/// `--warmup-rounds`: rounds of both sides before round 0, in the rounds' order, their runs
/// moved from the sides into `record`; the stopping signal that cut them short, if one did.
async fn warm_up(
    plan: &ComparePlan,
    (a, b): (&mut Side<'_>, &mut Side<'_>),
    observer: &Observing,
    listener: &mut signals::Listener,
    record: &mut Warmup,
) -> Option<i32> {
    for w in 0..plan.warmup_rounds {
        let a_first = w % 2 == 0;
        record
            .first
            .push(if a_first { "a" } else { "b" }.to_string());
        let stage = |side| Stage::WarmUp {
            round: w,
            of: plan.warmup_rounds,
            label: plan.label(side),
            side,
        };
        let both = (&mut *a, &mut *b);
        let sig = run_round(w, &stage, a_first, both, observer, listener).await;
        record.a.extend(a.discard_last());
        record.b.extend(b.discard_last());
        if sig.is_some() {
            return sig;
        }
    }
    None
}

/// One round (run `round` of each side), both sides in turn, the observer told which one
/// runs; the stopping signal that cut it short, if one did.
async fn run_round<'s>(
    round: u32,
    stage: &dyn Fn(char) -> Stage<'s>,
    a_first: bool,
    (a, b): (&mut Side<'_>, &mut Side<'_>),
    observer: &Observing,
    listener: &mut signals::Listener,
) -> Option<i32> {
    let show = |side: char| observer.stage(&stage(side));
    let both = async {
        if a_first {
            show('A');
            a.run(round).await;
            show('B');
            b.run(round).await;
        } else {
            show('B');
            b.run(round).await;
            show('A');
            a.run(round).await;
        }
    };
    tokio::select! {
        () = both => None,
        sig = listener.next() => Some(sig),
    }
}

/// Rounds are compared in pairs: half a round is no round.
fn drop_half_round(a: &mut Side<'_>, b: &mut Side<'_>) {
    match a.runs.len().cmp(&b.runs.len()) {
        std::cmp::Ordering::Greater => a.discard_last(),
        std::cmp::Ordering::Less => b.discard_last(),
        std::cmp::Ordering::Equal => None,
    };
}
