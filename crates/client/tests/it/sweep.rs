//! `qbench sweep`: shipped scenarios are valid, cells run and resume, bad files are refused
//! before anything runs.
//!
//! A sweep that runs a cell needs root, link or not: after each cell it sets its network
//! namespace back (setns), which takes CAP_SYS_ADMIN even for the namespace it is in.

use std::path::Path;

use clap::Parser;
use qbench::flags::cli::{Cli, Command};
use qbench::flags::rerun::{compare_command, compete_command};
use qbench_core::scenario::CellSpec;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;

use crate::common;

use common::needs::{require, Need};
use common::sweeps::{report, report_with, sweep, swept};

#[test]
fn shipped_scenarios_expand_into_valid_comparisons() {
    // Planning a cell with `client_cpu` checks that its cgroup can be made.
    require!(Need::Root, Need::CgroupCpu);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with('#'),
            "{}: starts with a comment naming the experiment",
            path.display()
        );
        let s = qbench::commands::sweep::load_scenario(&path, &text)
            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        let planned = qbench_engine::SweepPlan::new(&s, dir.join("unused"), &[])
            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        for (cell, plan) in planned.cells {
            let (metric, test) = match &plan {
                qbench_engine::CellPlan::Compare(p) => {
                    // Every shipped comparison can reach a verdict with its rounds.
                    assert_eq!(p.out_of_reach(), None, "{}", path.display());
                    (p.metric, p.test)
                }
                qbench_engine::CellPlan::Compete(_) => (Metric::Plt, Test::Welch),
            };
            // The command line shown for a cell sets exactly its spec (and its metric), and
            // the hash is the spec's: flags are a way to write it, not part of it.
            let (argv, spec) = match &cell.spec {
                CellSpec::Compare(s) => (
                    compare_command(s, metric, test),
                    CellSpec::Compare(s.clone()),
                ),
                CellSpec::Compete(s) => (compete_command(s), CellSpec::Compete(s.clone())),
            };
            // A page is named as the scenario names it, relative to the scenario's directory.
            let page_name = argv
                .iter()
                .position(|a| a == "--page")
                .map(|i| argv[i + 1].clone());
            let mut argv = argv;
            if let Some(i) = argv.iter().position(|a| a == "--page") {
                argv[i + 1] = dir.join(&argv[i + 1]).display().to_string();
            }
            let parsed = match Cli::try_parse_from(&argv).unwrap().command {
                Some(Command::Compare(c)) => {
                    let spec = c.spec().unwrap();
                    let chosen = c
                        .judge
                        .metric
                        .unwrap_or(Metric::default_for_spec(&spec.base));
                    assert_eq!(chosen, metric, "{argv:?}");
                    assert_eq!(c.judge.test, test, "{argv:?}");
                    let mut spec = spec;
                    if let (Some(p), Some(name)) = (&mut spec.base.page, &page_name) {
                        p.name = name.clone();
                    }
                    CellSpec::Compare(spec)
                }
                Some(Command::Compete(c)) => CellSpec::Compete(c.spec()),
                _ => panic!("{argv:?}"),
            };
            assert_eq!(parsed, spec, "{argv:?}");
            assert_eq!(parsed.hash(), cell.hash);
        }
        n += 1;
    }
    assert!(n >= 10, "scenario files found: {n}");
}

#[test]
fn cells_run_once_and_resume() {
    require!(Need::Root);
    let dir = tempfile::tempdir().unwrap();
    let (file, out, stdout) = swept(
        dir.path(),
        "tiny.toml",
        "# tiny\nname = \"tiny\"\n[base]\nprotos = \"h2,h3\"\nrounds = 2\n[axes]\nobjects = [\"1x1KB\", \"3x2KB\"]\n",
    );
    let cells: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(cells.len(), 2, "{cells:?}");
    for c in &cells {
        let j: serde_json::Value = serde_json::from_slice(&std::fs::read(c).unwrap()).unwrap();
        assert_eq!(j["schema"], "qbench.sweep-cell");
        assert_eq!(j["report"]["complete"], true);
        assert_eq!(j["report"]["a"]["runs"].as_array().unwrap().len(), 2);
    }
    assert!(stdout.contains("2 cells (2 run, 0 skipped)"), "{stdout}");
    let (ok, stdout, stderr) = sweep(&file, &out);
    assert!(ok);
    assert!(stdout.contains("(0 run, 2 skipped)"), "{stdout}");
    assert_eq!(stderr.matches("skipped").count(), 2, "{stderr}");
    // A cell file whose spec was edited (its stored hash left alone) is not that cell: the
    // hash is recomputed from the stored spec, and the cell runs again.
    let mut j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cells[0]).unwrap()).unwrap();
    let spec = j["cell"]["spec"].to_string();
    assert!(spec.contains("\"connections\":1"), "{spec}");
    j["cell"]["spec"] =
        serde_json::from_str(&spec.replacen("\"connections\":1", "\"connections\":7", 1)).unwrap();
    std::fs::write(&cells[0], j.to_string()).unwrap();
    let (ok, stdout, _) = sweep(&file, &out);
    assert!(ok);
    assert!(stdout.contains("(1 run, 1 skipped)"), "{stdout}");

    let page = dir.path().join("report.html");
    report(&out, &page);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg") && html.contains("1x1KB") && html.contains("3x2KB"));
    assert_eq!(
        html.matches("<td>h2</td><td>h3</td>").count(),
        2,
        "one table row per cell"
    );
    let heatmap = dir.path().join("report.heatmap-0.svg");
    let first = std::fs::read_to_string(&heatmap).unwrap();
    assert!(first.contains("<svg"), "{first}");

    // Without --html the page goes into the sweep's directory, and a second page beside the
    // first keeps to its own SVG files.
    let c = common::qbench_plain(&["report", out.to_str().unwrap()]);
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    assert!(out.join("report.html").is_file() && out.join("report.heatmap-0.svg").is_file());
    report(&out, &dir.path().join("other.html"));
    assert!(dir.path().join("other.heatmap-0.svg").is_file());
    assert_eq!(std::fs::read_to_string(&heatmap).unwrap(), first);
    // A file of the user's in the way of one is left alone, and the report fails naming it.
    std::fs::write(dir.path().join("mine.heatmap-0.svg"), "mine").unwrap();
    let c = report_with(&out, &dir.path().join("mine.html"), &[]);
    assert_eq!(c.code, Some(2), "{}", c.stderr);
    assert!(c.stderr.contains("mine.heatmap-0.svg"), "{}", c.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("mine.heatmap-0.svg")).unwrap(),
        "mine"
    );
}

/// Held-load cells at request rates: judged by the scenario's metric, judged anew when the
/// scenario names another (without running again), and by `qbench report --metric`.
#[test]
fn held_load_cells_judge_by_their_metric() {
    require!(Need::Root);
    let dir = tempfile::tempdir().unwrap();
    let text = |metric: &str| {
        format!("# tail\nname = \"tail\"\n[base]\nprotos = \"h2,h3\"\nrounds = 2\nobjects = \"1x1KB\"\nduration = \"600ms\"\nwarmup = \"100ms\"\nmetric = \"{metric}\"\n[axes]\nrequest_rate = [\"50\", \"100\"]\n")
    };
    let (file, out, stdout) = swept(dir.path(), "tail.toml", &text("p99"));
    assert!(stdout.contains("2 cells (2 run, 0 skipped)"), "{stdout}");
    let cells = || -> Vec<serde_json::Value> {
        let mut v: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
            .collect();
        v.sort_by_key(|j: &serde_json::Value| j["cell"]["params"]["request_rate"].to_string());
        v
    };
    for (j, rate) in cells().iter().zip([100.0, 50.0]) {
        assert_eq!(j["schema_version"], 5);
        let r = &j["report"];
        assert_eq!(r["schema_version"], 6);
        assert_eq!(r["comparison"]["metric"], "p99");
        // A scenario that names no test is judged as `qbench compare` judges.
        assert_eq!(r["comparison"]["test"], "mann-whitney");
        // 2 rounds: too few for Mann-Whitney to reach p < 0.01, and the cell says so.
        assert_eq!(r["comparison"]["undecided"]["reason"], "too_few_rounds");
        assert_eq!(r["comparison"]["a"]["n"], 2, "{}", r["comparison"]);
        for side in ["a", "b"] {
            assert_eq!(r[side]["config"]["load"]["rate"], rate);
            for run in r[side]["runs"].as_array().unwrap() {
                assert_eq!(run["load"]["mode"], "open");
                assert!(run["plt_us"].is_null());
            }
        }
        // The figure compared is the runs' p99, as each run reported it.
        let p99: Vec<f64> = r["a"]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["object_latency"]["p99_us"].as_f64().unwrap())
            .collect();
        let mean = p99.iter().sum::<f64>() / 2.0;
        assert!((r["comparison"]["a"]["mean"].as_f64().unwrap() - mean).abs() < 1e-6);
    }
    assert!(
        stdout.contains("q: Benjamini-Hochberg over the 2 compared cells"),
        "{stdout}"
    );
    let with_test = text("rps").replace("metric = ", "test = \"mann-whitney\"\nmetric = ");
    std::fs::write(&file, with_test).unwrap();
    let (ok, stdout, stderr) = sweep(&file, &out);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("(0 run, 2 skipped)"), "{stdout}");
    assert!(cells().iter().all(|j| {
        let c = &j["report"]["comparison"];
        c["metric"] == "rps" && c["test"] == "mann-whitney" && c["effect"].is_object()
    }));

    let page = dir.path().join("tail.html");
    let c = report_with(&out, &page, &["--metric", "p50"]);
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("p50 latency") && html.contains("--metric p50"),
        "{html}"
    );
    assert!(
        html.contains("q (FDR)") && html.contains("<title>"),
        "{html}"
    );
    let c = report_with(&out, &page, &["--test", "bootstrap", "--no-fdr"]);
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("with the bootstrap of medians") && html.contains("per round"));
    let c = report_with(&out, &page, &["--fdr", "1.5"]);
    assert_eq!(c.code, Some(2), "{}", c.stderr);
    assert!(c.stderr.contains("--fdr"), "{}", c.stderr);
    let c = report_with(&out, &page, &["--metric", "plt"]);
    assert_eq!(c.code, Some(2), "{}", c.stderr);
    assert!(c.stderr.contains("--metric") && c.stderr.contains("page load time"));
}

/// A version 2 cell (page load times under their old names) is still read and reported.
#[test]
fn version_2_cells_are_read() {
    require!(Need::Root);
    let dir = tempfile::tempdir().unwrap();
    let (file, out, _) = swept(
        dir.path(),
        "tiny.toml",
        "# tiny\nname = \"tiny\"\n[base]\nprotos = \"h2,h3\"\nrounds = 2\nobjects = \"1x1KB\"\n",
    );
    let path = std::fs::read_dir(&out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut j: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    j["schema_version"] = 2.into();
    let c = j["report"]["comparison"].as_object_mut().unwrap();
    c.remove("metric");
    for (old, new) in [
        ("plt_us_a", "a"),
        ("plt_us_b", "b"),
        ("plt_diff_pct", "diff_pct"),
    ] {
        let v = c.remove(new).unwrap();
        c.insert(old.into(), v);
    }
    std::fs::write(&path, serde_json::to_vec(&j).unwrap()).unwrap();
    let (ok, stdout, stderr) = sweep(&file, &out);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("(0 run, 1 skipped)"), "{stdout}");
    let page = dir.path().join("r.html");
    report(&out, &page);
    assert!(std::fs::read_to_string(page).unwrap().contains("PLT"));
}

#[test]
fn smoke_scenario_runs_across_emulated_links() {
    require!(Need::Link);
    let dir = tempfile::tempdir().unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/smoke.toml");
    let (ok, stdout, stderr) = sweep(&file, dir.path());
    assert!(ok, "{stderr}");
    assert!(stdout.contains("4 cells (4 run, 0 skipped)"), "{stdout}");
    eprintln!("{stdout}");
}

#[test]
fn compete_cells_run_and_report() {
    require!(Need::Link);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fair.toml");
    std::fs::write(
        &file,
        "# fairness\nname = \"fair\"\nkind = \"compete\"\n[base]\nobjects = \"1x300KB\"\nlink = \"rate=20mbit,rtt=10ms\"\n[axes]\nflows = [\"h3:1,h2:1\"]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let (ok, stdout, stderr) = sweep(&file, &out);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("Jain's index"), "{stdout}");
    let page = dir.path().join("r.html");
    report(&out, &page);
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.contains("Competitions") && html.contains("h3 #1"));
}

#[test]
fn bad_scenarios_are_refused_before_running() {
    let dir = tempfile::tempdir().unwrap();
    for (text, needle) in [
        (
            "name = \"x\"\n[base]\nprotos = \"h2,h3\"\nbandwith = 1\n",
            "line 4",
        ),
        (
            "name = \"x\"\n[base]\nprotos = \"h2,h4\"\n",
            "protos: `h4` is not h1, h2 or h3",
        ),
        (
            "name = \"x\"\n[base]\nprotos = \"h2,h3\"\n[axes]\nrate = [\"fast\"]\n",
            "line 5: axes.rate value `fast`: ",
        ),
    ] {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, text).unwrap();
        let out = dir.path().join("never");
        let (ok, _, stderr) = sweep(&file, &out);
        assert!(!ok);
        assert!(stderr.contains(needle), "{needle}: {stderr}");
        assert!(!out.exists(), "nothing ran");
    }
}

#[test]
fn results_of_an_earlier_format_are_refused_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.toml");
    std::fs::write(
        &file,
        "# tiny\nname = \"tiny\"\n[base]\nprotos = \"h2,h3\"\nrounds = 2\nobjects = \"1x1KB\"\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let old = out.join("cell-0123456789abcdef.json");
    let v1 = r#"{"schema":"qbench.sweep-cell","scenario":"tiny","cell":{"params":{},"command":"compare","args":["--protos","h2,h3"],"hash":"0123456789abcdef"},"report":{"complete":true}}"#;
    std::fs::write(&old, v1).unwrap();
    let (ok, _, stderr) = sweep(&file, &out);
    assert!(!ok);
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: --out: ")
            && last.contains("sweep-cell version 1")
            && last.contains("new --out directory"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&old).unwrap(), v1, "left as it was");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1, "nothing ran");
    let page = dir.path().join("r.html");
    let c = common::qbench_plain(&[
        "report",
        out.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(c.code, Some(1));
    assert!(c.stderr.contains("sweep-cell version 1"), "{}", c.stderr);
}

#[test]
fn a_closed_pipe_ends_a_sweep_quietly_between_cells() {
    require!(Need::Root);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.toml");
    std::fs::write(
        &file,
        "name = \"tiny\"\n[base]\nprotos = \"h2,h3\"\nrounds = 2\ntest = \"welch\"\n[axes]\nobjects = [\"1x1KB\", \"2x1KB\", \"3x1KB\"]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    // As `qbench sweep ... 2>&1 | head -1`: the reader goes after the first line.
    let run = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#""$0" sweep "$1" --out "$2" 2>&1 | head -1; echo "status=${PIPESTATUS[0]}""#)
        .arg(env!("CARGO_BIN_EXE_qbench"))
        .arg(&file)
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.starts_with("[1/3]"), "{stdout}");
    assert!(
        stdout.contains("status=141"),
        "ends as SIGPIPE would: {stdout}"
    );
    let files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(files.len() < 3, "stopped between cells: {files:?}");
    assert!(
        files.iter().all(|f| !f.to_string_lossy().ends_with(".tmp")),
        "{files:?}"
    );
}

/// `--dry-run` lists every cell with its comparison and least time, and runs and writes
/// nothing, not even the `--out` directory; without it, `--out` is required.
#[test]
fn a_dry_run_lists_the_cells_and_writes_nothing() {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/smoke.toml");
    let scenario = scenario.to_str().unwrap();
    let out = tempfile::tempdir().unwrap();
    let never = out.path().join("never");
    let never = never.to_str().unwrap();
    let r = common::qbench_plain(&["sweep", scenario, "--dry-run", "--out", never]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[0].starts_with("sweep smoke: 4 cells, at least ")
            && lines[0].ends_with("nothing run"),
        "{}",
        r.stdout
    );
    assert_eq!(lines.len(), 5, "{}", r.stdout);
    assert!(
        lines[1].starts_with(
            "  [1/4] objects=1x10KB rate=20mbit: h2 vs h3, 5 rounds after 1 warm-up; at least "
        ),
        "{}",
        r.stdout
    );
    assert!(!Path::new(never).exists(), "a dry run made --out");
    let r = common::qbench_plain(&["sweep", scenario]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--out"), "{}", r.stderr);
}
