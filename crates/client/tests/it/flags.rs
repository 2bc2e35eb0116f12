//! Every flag of `qbench compare` and `qbench compete` either sets the typed spec and comes
//! back out of `rerun` (the command line a sweep cell shows) as the same spec, or is named
//! here as one that leaves the spec alone (an output, a target, how a link is built). A new
//! flag fails this test until it is given a sample value and takes one of the two roads.

use std::collections::BTreeSet;
use std::path::Path;

use clap::{CommandFactory, Parser};
use qbench::flags::cli::{Cli, Command};
use qbench::flags::rerun::{compare_command, compete_command};
use qbench_core::spec::knobs::knob;
use qbench_core::spec::{CompareSpec, CompeteSpec};
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;

/// Flags that are not part of a cell's spec: where results go, whom to measure, how an
/// emulated link is built on this machine, and what only a single benchmark copy takes.
const NOT_IN_SPEC: &[&str] = &[
    "target",
    "url",
    "repeat",
    "connect-to",
    "ca",
    "insecure",
    "telemetry-token",
    "json",
    "state-graph",
    "plot",
    "qlog",
    "qlog-sample",
    "keylog",
    "log-requests",
    "hgrm",
    "json-stream",
    "backend",
    "offloads",
    "dry-run",
    "no-calibrate",
    "strict-link",
    "shard",
    "start-at",
    "steal-threshold",
    "discard-noisy",
    "recalibrate",
    "warmup-rounds",
    "fail-if",
    "fail-early",
    "metrics-listen",
    "tui",
    "no-tui",
    "html",
];

/// The arguments that make `flag` differ from its default (with what it needs beside it).
fn sample(flag: &str, page: &str) -> Option<Vec<String>> {
    if let Some(v) = knob_sample(flag) {
        return Some(v);
    }
    let v: &[&str] = match flag {
        "proto" => &["--proto", "h2"],
        "protos" => &["--protos", "h1,h3"],
        "objects" => &["--objects", "3x7KB"],
        "target" => &["--target", "https://198.18.0.1:4433"],
        "url" => &["--url", "https://198.18.0.1:4433/bytes/10"],
        "repeat" => &["--url", "https://198.18.0.1:4433/bytes/10", "--repeat", "3"],
        "connect-to" => &["--connect-to", "198.18.0.1:4433"],
        "ca" => &["--ca", "/nonexistent/ca.pem"],
        "insecure" => &["--insecure"],
        "telemetry-token" => &["--telemetry-token", "t0ken"],
        "json" => &["--json", "out.json"],
        "state-graph" => &["--state-graph", "g.svg"],
        "plot" => &["--plot", "p.svg"],
        "qlog" => &["--qlog", "qlogs"],
        "qlog-sample" => &["--qlog-sample", "0.5"],
        "keylog" => &["--keylog", "keys.log"],
        "log-requests" => &["--log-requests", "r.csv"],
        "hgrm" => &["--hgrm", "h.hgrm"],
        "html" => &["--html", "p.html"],
        "fail-if" => &["--fail-if", "p99>1s"],
        "fail-early" => &["--fail-if", "p99>1s", "--fail-early"],
        "metrics-listen" => &["--metrics-listen", "127.0.0.1:0"],
        "tui" => &["--tui"],
        "no-tui" => &["--no-tui"],
        "backend" => &["--link", "rtt=10ms", "--backend", "userspace"],
        "offloads" => &["--link", "rtt=10ms", "--offloads", "off"],
        "dry-run" => &["--link", "rtt=10ms", "--dry-run"],
        "no-calibrate" => &["--link", "rtt=10ms", "--no-calibrate"],
        "strict-link" => &["--link", "rtt=10ms", "--strict-link"],
        "video" => &["--video", "1,2mbit"],
        "video-quality" => &["--video", "1,2mbit", "--video-quality", "2mbit"],
        "segment" => &["--video", "1,2mbit", "--segment", "3s"],
        "length" => &["--video", "1,2mbit", "--length", "40s"],
        "start-buffer" => &["--video", "1,2mbit", "--start-buffer", "3s"],
        "max-buffer" => &["--video", "1,2mbit", "--max-buffer", "50s"],
        "watch" => &["--video", "1,2mbit", "--watch", "20s"],
        "page" => return Some(vec!["--page".into(), page.into()]),
        "shard" => &["--shard", "1/2"],
        "start-at" => &["--start-at", "+1s"],
        "rounds" => &["--rounds", "4"],
        "min-rounds" => &["--rounds", "auto", "--min-rounds", "6"],
        "max-rounds" => &["--rounds", "auto", "--max-rounds", "60"],
        "precision" => &["--rounds", "auto", "--precision", "5%"],
        "metric" => &["--metric", "goodput"],
        "test" => &["--test", "welch"],
        "steal-threshold" => &["--steal-threshold", "20%"],
        "discard-noisy" => &["--discard-noisy"],
        "warmup-rounds" => &["--warmup-rounds", "2"],
        "recalibrate" => &["--link", "rtt=10ms", "--recalibrate"],
        "json-stream" => &["--interval", "1s", "--json-stream", "s.jsonl"],
        "flows" => &["--flows", "h2,h3,h3"],
        _ => return None,
    };
    Some(v.iter().map(|s| s.to_string()).collect())
}

/// `--flag SAMPLE` of a run knob, or `--a.flag SAMPLE` of a side's, after the flags its sample
/// needs (the knob table's own samples).
fn knob_sample(flag: &str) -> Option<Vec<String>> {
    let (side, name) = match flag.split_once('.') {
        Some(("a" | "b", rest)) => (true, rest),
        Some(_) => return None,
        None => (false, flag),
    };
    let k = knob(name)?;
    if side && k.side.is_none() {
        return None;
    }
    let mut v = Vec::new();
    for need in k.needs {
        v.extend([format!("--{need}"), knob(need)?.sample.to_string()]);
    }
    // curl, the sample contestant, has no HTTP/3.
    if name == "client" {
        v.extend(["--proto".to_string(), "h2".to_string()]);
    }
    v.push(format!("--{flag}"));
    if !k.switch {
        v.push(k.sample.to_string());
    }
    Some(v)
}

/// Every long flag of a subcommand but --help.
fn flags(sub: &str) -> Vec<String> {
    let cmd = Cli::command();
    let sub = cmd.find_subcommand(sub).expect("the subcommand exists");
    sub.get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "help")
        .map(str::to_string)
        .collect()
}

fn parse(argv: &[String]) -> Command {
    Cli::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
        .command
        .expect("a subcommand")
}

/// What a compare cell is: its spec and how it is judged.
fn compare_cell(argv: &[String]) -> (CompareSpec, Metric, Test) {
    match parse(argv) {
        Command::Compare(c) => {
            let spec = c.spec().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let metric = c
                .judge
                .metric
                .unwrap_or(Metric::default_for_spec(&spec.base));
            (spec, metric, c.judge.test)
        }
        _ => unreachable!("compare parses as compare"),
    }
}

fn compete_cell(argv: &[String]) -> CompeteSpec {
    match parse(argv) {
        Command::Compete(c) => c.spec(),
        _ => unreachable!("compete parses as compete"),
    }
}

fn page() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/pages/median-page.har")
        .display()
        .to_string()
}

/// A sample split into what `flag` needs beside it and `flag` with its value: whether `flag`
/// is part of the spec is seen against the same command without it.
fn split(flag: &str, mut sample: Vec<String>) -> (Vec<String>, Vec<String>) {
    let at = sample
        .iter()
        .rposition(|a| *a == format!("--{flag}"))
        .expect("a sample gives its flag");
    let given = sample.split_off(at);
    (sample, given)
}

/// `flag` as the rerun command line carries it: the flag itself, or the flag it implies.
fn carried(flag: &str, argv: &[String]) -> bool {
    argv.iter().any(|a| *a == format!("--{flag}"))
}

#[test]
fn every_compare_flag_is_in_the_spec_and_comes_back_or_is_named_as_not() {
    let base: Vec<String> = ["qbench", "compare", "--protos", "h2,h3"]
        .map(String::from)
        .to_vec();
    let mut outside = BTreeSet::new();
    let all = flags("compare");
    assert!(all.len() > 60, "{all:?}");
    for flag in &all {
        let extra = sample(flag, &page()).unwrap_or_else(|| {
            panic!("--{flag} has no sample: give it one in `sample` (tests/it/flags.rs)")
        });
        let (with, given) = split(flag, extra);
        let mut argv = base.clone();
        argv.extend(with);
        let without = compare_cell(&argv);
        if flag == "protos" {
            // Given once: the sample replaces the base's.
            argv.drain(2..4);
        }
        argv.extend(given);
        let cell = compare_cell(&argv);
        if cell == without {
            outside.insert(flag.clone());
            continue;
        }
        let (spec, metric, test) = &cell;
        let rerun = compare_command(spec, *metric, *test);
        assert!(
            carried(flag, &rerun),
            "--{flag} changed the spec but the rerun line does not carry it: {rerun:?}"
        );
        assert_eq!(
            compare_cell(&rerun),
            cell,
            "--{flag}: {argv:?} -> {rerun:?}"
        );
    }
    let named: BTreeSet<String> = NOT_IN_SPEC.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        outside, named,
        "the flags that leave a compare spec alone are exactly those named in NOT_IN_SPEC"
    );
}

#[test]
fn every_compete_flag_is_in_the_spec_and_comes_back_or_is_named_as_not() {
    let base: Vec<String> = ["qbench", "compete", "--flows", "h2,h3"]
        .map(String::from)
        .to_vec();
    let mut outside = BTreeSet::new();
    for flag in flags("compete") {
        let extra = sample(&flag, &page()).unwrap_or_else(|| {
            panic!("--{flag} has no sample: give it one in `sample` (tests/it/flags.rs)")
        });
        let (with, given) = split(&flag, extra);
        let mut argv = base.clone();
        argv.extend(with);
        let without = compete_cell(&argv);
        if flag == "flows" {
            // Given once: the sample replaces the base's.
            argv.drain(2..4);
        }
        argv.extend(given);
        let spec = compete_cell(&argv);
        if spec == without {
            outside.insert(flag);
            continue;
        }
        let rerun = compete_command(&spec);
        assert!(
            carried(&flag, &rerun),
            "--{flag} changed the spec but the rerun line does not carry it: {rerun:?}"
        );
        assert_eq!(
            compete_cell(&rerun),
            spec,
            "--{flag}: {argv:?} -> {rerun:?}"
        );
    }
    let compare_only = [
        "steal-threshold",
        "discard-noisy",
        "recalibrate",
        "warmup-rounds",
    ];
    let named: BTreeSet<String> = NOT_IN_SPEC
        .iter()
        .filter(|f| !compare_only.contains(f))
        .map(|s| s.to_string())
        .collect();
    assert_eq!(outside, named);
}

/// `--a.X` and `--b.X` exist for every knob the table gives a side, show the common `--X`'s
/// value name and choices, and are held to the same range and choices, naming themselves.
#[test]
fn side_flags_come_from_the_table_and_read_as_their_common_flag() {
    let cli = Cli::command();
    let compare = cli.find_subcommand("compare").expect("compare");
    let arg = |long: &str| compare.get_arguments().find(|a| a.get_long() == Some(long));
    for (k, _) in qbench_core::spec::knobs::side_knobs() {
        let common = arg(k.flag).unwrap_or_else(|| panic!("--{} has a side, no flag", k.flag));
        for side in ["a", "b"] {
            let long = format!("{side}.{}", k.flag);
            let flag = arg(&long).unwrap_or_else(|| panic!("no --{long}"));
            assert_eq!(flag.get_value_names(), common.get_value_names(), "--{long}");
            let names = |a: &clap::Arg| -> Vec<String> {
                let values = a.get_possible_values();
                values.iter().map(|v| v.get_name().to_string()).collect()
            };
            assert_eq!(names(flag), names(common), "--{long}");
        }
    }
    for (args, says) in [
        (&["--a.connections", "0"][..], "1 to 25000 connections"),
        (&["--b.cwnd-cap", "x"][..], "1 or more packets"),
        (&["--a.cc", "vegas"][..], "possible values: cubic"),
        (&["--a.client-cpu", "0"][..], "a share of one core"),
        (&["--b.proxy", "h1"][..], "'--b.proxy <PROTO>'"),
        (&["--a.client", ""][..], "'--a.client <NAME>'"),
    ] {
        let line = ["qbench", "compare", "--protos", "h2,h3"];
        let e = Cli::try_parse_from(line.iter().chain(args)).unwrap_err();
        let e = e.to_string();
        assert!(e.contains(args[0]) && e.contains(says), "{args:?}: {e}");
    }
    // A share of a core is held to this machine's cores, not to the most a scenario takes.
    let line = [
        "qbench",
        "compare",
        "--protos",
        "h2,h3",
        "--b.client-cpu",
        "inf",
    ];
    let e = Cli::try_parse_from(line).unwrap_err().to_string();
    let cores = qbench_engine::plan::cores();
    assert!(e.contains(&format!("to {cores} (the cores here)")), "{e}");
    let line = [
        "qbench",
        "compare",
        "--protos",
        "h2,h3",
        "--a.client-cpu",
        "none",
    ];
    let Command::Compare(c) = Cli::try_parse_from(line).unwrap().command.unwrap() else {
        panic!("not compare")
    };
    let none = qbench_core::spec::cpulimit::CpuQuota::None;
    assert_eq!(c.a.0.client_cpu, Some(none));
    assert_eq!(c.b.0.client_cpu, None);
}
