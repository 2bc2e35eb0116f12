//! The command line that reruns a spec, for people to read and copy: the flags that differ
//! from the defaults, in one order.

use qbench_core::spec::knobs::{side_knobs, KNOBS};
use qbench_core::spec::{CompareSpec, CompeteSpec, RunSpec, SideOverrides};
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;

fn push(args: &mut Vec<String>, flag: &str, value: Option<String>) {
    if let Some(v) = value {
        args.push(format!("--{flag}"));
        args.push(v);
    }
}

/// The flags that set `s` where it differs from the defaults, for people to read and rerun.
fn run_flags(s: &RunSpec, args: &mut Vec<String>) {
    let d = RunSpec::default();
    let objects = s
        .objects
        .as_ref()
        .filter(|w| Some(*w) != d.objects.as_ref());
    push(args, "objects", objects.map(|w| w.to_string()));
    if let Some(v) = &s.video {
        let time = |d| Some(humantime::format_duration(d).to_string());
        let ladder: Vec<String> = v.bitrates.iter().map(|r| format!("{}bit", r.0)).collect();
        push(args, "video", Some(ladder.join(",")));
        push(args, "video-quality", Some(String::from(v.quality)));
        push(args, "segment", time(v.segment));
        push(args, "length", time(v.length));
        push(args, "start-buffer", time(v.start_buffer));
        push(args, "max-buffer", time(v.max_buffer));
        push(args, "watch", v.watch.and_then(time));
    }
    push(args, "page", s.page.as_ref().map(|p| p.name.clone()));
    for k in KNOBS {
        match (k.get)(s) {
            Some(_) if k.switch => args.push(format!("--{}", k.flag)),
            v => push(args, k.flag, v),
        }
    }
}

fn side_flags(side: &str, o: &SideOverrides, args: &mut Vec<String>) {
    for (k, s) in side_knobs() {
        push(args, &format!("{side}.{}", k.flag), (s.get)(o));
    }
}

/// `qbench compare ...` that runs `s` and judges it by `metric` and `test`.
pub fn compare_command(s: &CompareSpec, metric: Metric, test: Test) -> Vec<String> {
    let mut args: Vec<String> = vec!["qbench".into(), "compare".into()];
    push(
        &mut args,
        "protos",
        Some(format!("{},{}", s.protos.0, s.protos.1)),
    );
    match &s.auto_rounds {
        Some(rule) => {
            push(&mut args, "rounds", Some("auto".into()));
            push(&mut args, "min-rounds", Some(rule.min.to_string()));
            push(&mut args, "max-rounds", Some(rule.max.to_string()));
            push(
                &mut args,
                "precision",
                Some(format!("{}%", rule.precision_pct)),
            );
        }
        None => push(&mut args, "rounds", Some(s.rounds.to_string())),
    }
    push(&mut args, "proto", Some(s.base.proto.to_string()));
    run_flags(&s.base, &mut args);
    side_flags("a", &s.a, &mut args);
    side_flags("b", &s.b, &mut args);
    push(
        &mut args,
        "metric",
        (metric != Metric::default_for_spec(&s.base)).then(|| metric.to_string()),
    );
    push(
        &mut args,
        "test",
        (test != crate::flags::judge::DEFAULT_TEST).then(|| test.name().to_string()),
    );
    args
}

/// `qbench compete ...` that runs `s`.
pub fn compete_command(s: &CompeteSpec) -> Vec<String> {
    let mut args: Vec<String> = vec!["qbench".into(), "compete".into()];
    let flows: Vec<String> = s.flows.iter().map(|(p, n)| format!("{p}:{n}")).collect();
    push(&mut args, "flows", Some(flows.join(",")));
    push(&mut args, "proto", Some(s.base.proto.to_string()));
    run_flags(&s.base, &mut args);
    args
}
