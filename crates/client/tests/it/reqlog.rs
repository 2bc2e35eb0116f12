//! `--log-requests`: one TSV line per request, agreeing with the report's counts and bytes,
//! with each request's connection, stream, status and error.

use crate::common;

use common::{qbench, qbench_plain, Served};

/// The data lines of a request log, split into fields (the header checked and left out).
fn lines(path: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut it = text.lines();
    assert_eq!(
        it.next(),
        Some("run\tconnection\tstream\tintended_us\tstart_us\tttfb_us\tend_us\tbytes\tstatus\terror\twarmup\turl")
    );
    it.map(|l| l.split('\t').map(String::from).collect())
        .collect()
}

#[test]
fn one_line_per_request_agreeing_with_the_report() {
    let dir = tempfile::tempdir().unwrap();
    for proto in ["h1", "h2", "h3"] {
        let log = dir.path().join(format!("{proto}.tsv"));
        let streams = if proto == "h1" { "1" } else { "8" };
        let r = qbench(&[
            "--proto",
            proto,
            "--objects",
            "200x1KB",
            "--connections",
            "4",
            "--streams",
            streams,
            "--runs",
            "2",
            "--log-requests",
            log.to_str().unwrap(),
        ]);
        common::assert_complete(&r, 2, 200, 200_000);
        let rows = lines(&log);
        assert_eq!(rows.len(), 400, "{proto}");
        for row in &rows {
            assert_eq!(row.len(), 12, "{proto}: {row:?}");
            let n = |i: usize| row[i].parse::<u64>().unwrap();
            assert!(n(0) < 2 && n(1) < 4, "{proto}: {row:?}");
            assert!(n(4) <= n(6) && n(5) <= n(6) - n(4), "{proto}: {row:?}");
            assert_eq!((n(7), row[8].as_str(), row[9].as_str()), (1000, "200", "-"));
            assert_eq!(row[3], "-", "no intended start in a closed loop");
            assert_eq!(row[10], "0", "no warm-up without a held load");
            match proto {
                "h1" => assert_eq!(row[2], "-"),
                // Client-initiated bidirectional streams: h2 odd ids, h3 multiples of 4.
                "h2" => assert_eq!(n(2) % 2, 1),
                _ => assert_eq!(n(2) % 4, 0),
            }
        }
        // Within a connection of a run, no stream carries two requests.
        let mut seen = std::collections::HashSet::new();
        if proto != "h1" {
            assert!(rows
                .iter()
                .all(|r| seen.insert((r[0].clone(), r[1].clone(), r[2].clone()))));
        }
    }
}

/// A held load's warm-up requests are marked, as many as the report left out, and all started
/// (or, in an open loop, were due) before every measured one.
#[test]
fn a_held_loads_warm_up_requests_are_marked_as_the_report_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    for (name, rate) in [("closed", None), ("open", Some("200"))] {
        let log = dir.path().join(format!("{name}.tsv"));
        let mut args = vec![
            "--proto",
            "h2",
            "--objects",
            "1x1KB",
            "--duration",
            "1500ms",
            "--warmup",
            "500ms",
            "--log-requests",
            log.to_str().unwrap(),
        ];
        if let Some(rate) = rate {
            args.extend(["--rate", rate]);
        }
        let r = qbench(&args);
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        let run = &r.json.as_ref().unwrap()["runs"][0];
        let rows = lines(&log);
        // An open loop's start is when it was due; a closed loop's when it was sent.
        let start = |row: &Vec<String>| match rate {
            Some(_) => row[3].parse::<u64>().unwrap(),
            None => row[4].parse::<u64>().unwrap(),
        };
        let (warm, measured): (Vec<_>, Vec<_>) = rows.iter().partition(|row| row[10] == "1");
        assert!(rows.iter().all(|row| row[10] == "0" || row[10] == "1"));
        let dropped = run["load"]["dropped"].as_u64().unwrap_or(0);
        assert_eq!(dropped, 0, "{name}: {run}");
        assert_eq!(
            warm.len() as u64,
            run["load"]["warmup_requests"].as_u64().unwrap(),
            "{name}"
        );
        assert!(!warm.is_empty() && !measured.is_empty(), "{name}");
        let last_warm = warm.iter().map(|r| start(r)).max().unwrap();
        let first_measured = measured.iter().map(|r| start(r)).min().unwrap();
        assert!(
            last_warm <= first_measured,
            "{name}: {last_warm} > {first_measured}"
        );
    }
}

#[test]
fn an_open_loop_logs_intended_starts_and_failures_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("open.tsv");
    let r = qbench(&[
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
        "--duration",
        "500ms",
        "--rate",
        "40",
        "--log-requests",
        log.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let rows = lines(&log);
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|row| row[3].parse::<u64>().is_ok()),
        "{rows:?}"
    );

    let cert = dir.path().join("cert.pem");
    let server = Served::start(&[], &cert);
    let missing = format!("{}/nowhere", server.target);
    let log = dir.path().join("404.tsv");
    let r = qbench_plain(&[
        "--url",
        &missing,
        "--ca",
        cert.to_str().unwrap(),
        "--log-requests",
        log.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let rows = lines(&log);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0][8].as_str(), rows[0][9].as_str()),
        ("404", "status")
    );
    assert_eq!(rows[0][11], missing);
    assert!(server.stop());

    for (args, flag) in [
        (
            vec![
                "--objects",
                "1x1KB",
                "--log-requests",
                "/nonexistent/dir/r.tsv",
            ],
            "--log-requests",
        ),
        (
            vec!["compare", "--protos", "h2,h3", "--log-requests", "r.tsv"],
            "--log-requests",
        ),
    ] {
        let r = qbench_plain(&args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.starts_with(&format!("error: {flag}")),
            "{}",
            r.stderr
        );
    }
}
