//! Small input cases that used to end wrongly: an empty variable taken for a flag, bad input
//! that exited 1 instead of 2, a zero timeout accepted, a file where a directory belongs.

use std::process::{Command, Stdio};

fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = assert_cmd::cmd::Command::from_std(cmd)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A binary, its arguments, its environment, and what the error must name.
type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

const QBENCH: &str = env!("CARGO_BIN_EXE_qbench");

#[test]
fn empty_variables_are_unset() {
    let args = ["--proto", "h2", "--objects", "2x1KB", "--no-telemetry"];
    for var in ["SSLKEYLOGFILE", "QBENCH_TELEMETRY_TOKEN"] {
        let (code, err) = run(QBENCH, &args, &[(var, "")]);
        assert_eq!(code, Some(0), "{var}=: {err}");
    }
}

#[test]
fn bad_input_exits_2_naming_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let f = file.to_str().unwrap();
    let scenario = dir.path().join("bad.toml");
    std::fs::write(&scenario, "[[experiment]]\nname = 3\n").unwrap();
    let out_dir = dir.path().join("cells");
    let smoke = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/smoke.toml");
    let cases: [Case<'_>; 7] = [
        (QBENCH, vec!["cost", "--suite", "x"], vec![], "--suite"),
        (QBENCH, vec!["cost", "--mtu", "0"], vec![], "--mtu"),
        (QBENCH, vec!["man", "--out", f], vec![], "--out"),
        (QBENCH, vec!["sweep", smoke, "--out", f], vec![], "--out"),
        (
            QBENCH,
            vec![
                "sweep",
                scenario.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
            ],
            vec![],
            "SCENARIO",
        ),
        (
            QBENCH,
            vec![
                "proxy",
                "--upstream",
                "https://127.0.0.1:9",
                "--upstream-timeout",
                "0s",
            ],
            vec![],
            "--upstream-timeout",
        ),
        (
            QBENCH,
            vec!["serve"],
            vec![("TOKIO_WORKER_THREADS", "0")],
            "TOKIO_WORKER_THREADS",
        ),
    ];
    for (bin, args, env, names) in cases {
        let (code, err) = run(bin, &args, &env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(names),
            "{args:?}: {err}"
        );
        assert!(!first.contains("os error 17"), "{first}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}
