//! The command line that reruns a spec, for people to read and copy: the flags that differ
//! from the defaults, in one order.

use qbench_core::spec::load::{Arrivals, DEFAULT_MAX_INFLIGHT};
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
    let differs = |a: String, b: String| (a != b).then_some(a);
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
    push(args, "streams", s.streams.map(|v| v.to_string()));
    push(
        args,
        "connections",
        differs(s.connections.to_string(), d.connections.to_string()),
    );
    push(
        args,
        "runs",
        differs(s.runs.to_string(), d.runs.to_string()),
    );
    push(
        args,
        "timeout",
        differs(
            humantime::format_duration(s.timeout).to_string(),
            humantime::format_duration(d.timeout).to_string(),
        ),
    );
    push(args, "cc", s.cc.map(|c| c.to_string()));
    push(args, "cwnd-cap", s.cwnd_cap.map(|c| c.to_string()));
    push(args, "initial-cwnd", s.initial_cwnd.map(|c| c.to_string()));
    push(
        args,
        "reorder-threshold",
        s.reorder_threshold.map(|c| c.to_string()),
    );
    push(
        args,
        "reorder-time-threshold",
        s.reorder_time_threshold.map(|c| c.to_string()),
    );
    push(args, "rwnd", s.rwnd.map(|c| c.0.to_string()));
    push(
        args,
        "quic",
        (!s.quic.is_empty()).then(|| s.quic.to_string()),
    );
    push(args, "client-cpu", s.client_cpu.map(|c| c.to_string()));
    push(
        args,
        "client-cpuset",
        s.client_cpuset.as_ref().map(|c| c.to_string()),
    );
    push(
        args,
        "sample-interval",
        differs(
            humantime::format_duration(s.sample_interval).to_string(),
            humantime::format_duration(d.sample_interval).to_string(),
        ),
    );
    push(args, "link", s.link.as_ref().map(|l| l.text.clone()));
    push(args, "link-b", s.link_b.as_ref().map(|l| l.text.clone()));
    push(args, "proxy", s.proxy.map(|p| p.to_string()));
    push(args, "client", s.client.as_ref().map(|c| c.to_string()));
    push(
        args,
        "interval",
        s.interval
            .map(|d| humantime::format_duration(d).to_string()),
    );
    if let Some(l) = &s.load {
        let time = |d| Some(humantime::format_duration(d).to_string());
        push(args, "duration", time(l.duration));
        push(
            args,
            "warmup",
            time(l.warmup).filter(|_| !l.warmup.is_zero()),
        );
        push(args, "rate", l.rate.map(|r| r.to_string()));
        if l.rate.is_some() {
            push(
                args,
                "arrivals",
                (l.arrivals == Arrivals::Poisson).then(|| "poisson".into()),
            );
            push(
                args,
                "max-inflight",
                (l.max_inflight != DEFAULT_MAX_INFLIGHT).then(|| l.max_inflight.to_string()),
            );
        }
    }
    push(
        args,
        "client-threads",
        differs(s.client_threads.to_string(), d.client_threads.to_string()),
    );
    push(
        args,
        "server-threads",
        differs(s.server_threads.to_string(), d.server_threads.to_string()),
    );
    for (flag, on) in [
        ("reuse", s.reuse),
        ("resume", s.resume),
        ("0rtt", s.zero_rtt),
        ("verify", s.verify),
        ("no-telemetry", !s.telemetry),
    ] {
        if on {
            args.push(format!("--{flag}"));
        }
    }
}

fn side_flags(side: &str, o: &SideOverrides, args: &mut Vec<String>) {
    push(args, &format!("{side}.cc"), o.cc.map(|c| c.to_string()));
    push(
        args,
        &format!("{side}.cwnd-cap"),
        o.cwnd_cap.map(|c| c.to_string()),
    );
    push(
        args,
        &format!("{side}.initial-cwnd"),
        o.initial_cwnd.map(|c| c.to_string()),
    );
    push(
        args,
        &format!("{side}.rwnd"),
        o.rwnd.map(|c| c.0.to_string()),
    );
    push(
        args,
        &format!("{side}.connections"),
        o.connections.map(|c| c.to_string()),
    );
    push(
        args,
        &format!("{side}.streams"),
        o.streams.map(|c| c.to_string()),
    );
    push(
        args,
        &format!("{side}.client-cpu"),
        o.client_cpu.map(|c| c.to_string()),
    );
    push(
        args,
        &format!("{side}.proxy"),
        o.proxy.map(|c| c.to_string()),
    );
    push(
        args,
        &format!("{side}.client"),
        o.client.as_ref().map(|c| c.to_string()),
    );
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
