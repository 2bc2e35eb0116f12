//! No command writes over a file it reads: an output that is one of the command's inputs,
//! under any name (the same string, `./`, a hard or symbolic link), is refused before
//! anything runs, in one line naming the output's flag and the input, exit 2, the input
//! left as it was.

use crate::common;

use std::path::{Path, PathBuf};

use common::needs::{require, Need};
use common::qbench_within;

/// `args` exit 2 with one line naming `flag` and the input, and every file in `kept` holds
/// what it held before.
fn refused_and_kept(args: &[&str], flag: &str, kept: &[&Path]) {
    let before: Vec<Vec<u8>> = kept.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let r = qbench_within(args, 60);
    assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
    let errors: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{args:?}: {}", r.stderr);
    assert!(
        errors[0].starts_with(&format!("error: {flag}: ")) && errors[0].contains("an input"),
        "{args:?}: {}",
        r.stderr
    );
    for (p, b) in kept.iter().zip(before) {
        assert!(
            std::fs::read(p).unwrap() == b,
            "{args:?} changed {}",
            p.display()
        );
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A run report of two small objects, written to `dir/name`.
fn report_in(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let r = qbench_within(
        &["--proto", "h2", "--objects", "2x1KB", "--json", s(&path)],
        60,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    path
}

/// A HAR file of one page of two objects.
fn har_in(dir: &Path) -> PathBuf {
    let entry = |url: &str, size: u32| {
        format!(
            r#"{{"startedDateTime":"2020-01-01T00:00:00Z","time":1,"request":{{"method":"GET","url":"{url}","headers":[]}},"response":{{"status":200,"content":{{"size":{size}}},"bodySize":{size},"headers":[]}},"timings":{{"send":0,"wait":1,"receive":0}}}}"#
        )
    };
    let path = dir.join("page.har");
    let text = format!(
        r#"{{"log":{{"version":"1.2","entries":[{},{}]}}}}"#,
        entry("https://example.com/", 2000),
        entry("https://example.com/a.css", 1000)
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A self-signed certificate and its key for `localhost`.
fn identity_in(dir: &Path) -> (PathBuf, PathBuf) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

#[test]
fn report_will_not_draw_a_page_over_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let r = report_in(dir.path(), "r.json");
    refused_and_kept(&["report", s(&r), "--html", s(&r)], "--html", &[&r]);
    let hard = dir.path().join("hard.json");
    std::fs::hard_link(&r, &hard).unwrap();
    refused_and_kept(&["report", s(&r), "--html", s(&hard)], "--html", &[&r]);
}

#[test]
fn report_of_a_sweep_will_not_draw_a_page_over_a_cell() {
    require!(Need::Root);
    let dir = tempfile::tempdir().unwrap();
    let (_, out, _) = common::sweeps::swept(
        dir.path(),
        "one.toml",
        "name = \"one\"\n[base]\nprotos = \"h2,h3\"\nrounds = 2\n[axes]\nobjects = [\"1x1KB\"]\n",
    );
    let cell = std::fs::read_dir(&out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    refused_and_kept(&["report", s(&out), "--html", s(&cell)], "--html", &[&cell]);
}

#[test]
fn diff_will_not_write_over_either_report() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_in(dir.path(), "a.json");
    let b = report_in(dir.path(), "b.json");
    let dotted = dir.path().join(".").join("b.json");
    refused_and_kept(&["diff", s(&a), s(&b), "--out", s(&a)], "--out", &[&a, &b]);
    for format in ["text", "json"] {
        refused_and_kept(
            &["diff", s(&a), s(&b), "--format", format, "-o", s(&dotted)],
            "--out",
            &[&a, &b],
        );
    }
}

#[test]
fn hgrm_will_not_write_over_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let r = report_in(dir.path(), "r.json");
    refused_and_kept(&["hgrm", s(&r), "-o", s(&r)], "--out", &[&r]);
    let link = dir.path().join("link.hgrm");
    std::os::unix::fs::symlink(&r, &link).unwrap();
    refused_and_kept(&["hgrm", s(&r), "--out", s(&link)], "--out", &[&r]);
}

#[test]
fn a_benchmark_will_not_write_over_its_page_or_ca() {
    let dir = tempfile::tempdir().unwrap();
    let har = har_in(dir.path());
    let (cert, _) = identity_in(dir.path());
    let page = ["--proto", "h2", "--page", s(&har)];
    refused_and_kept(
        &[&page[..], &["--json", s(&har)]].concat(),
        "--json",
        &[&har],
    );
    // The key log is appended to: an input would still be changed.
    refused_and_kept(
        &[&page[..], &["--keylog", s(&har)]].concat(),
        "--keylog",
        &[&har],
    );
    let ca = [
        "--proto",
        "h2",
        "--target",
        "https://127.0.0.1:1",
        "--ca",
        s(&cert),
    ];
    refused_and_kept(
        &[&ca[..], &["--json", s(&cert)]].concat(),
        "--json",
        &[&cert],
    );
    refused_and_kept(
        &[&ca[..], &["--html", s(&cert)]].concat(),
        "--html",
        &[&cert],
    );
}

#[test]
fn compare_will_not_write_over_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let har = har_in(dir.path());
    let args = [
        "compare",
        "--protos",
        "h2,h3",
        "--rounds",
        "2",
        "--page",
        s(&har),
    ];
    refused_and_kept(
        &[&args[..], &["--json", s(&har)]].concat(),
        "--json",
        &[&har],
    );
}

#[test]
fn compete_will_not_write_over_its_link_trace() {
    require!(Need::Link);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("rate.trace");
    std::fs::write(&trace, "0 50mbit\n").unwrap();
    let link = format!("rate=trace:{}", s(&trace));
    let args = [
        "compete",
        "--flows",
        "h2:1,h3:1",
        "--objects",
        "1x1KB",
        "--link",
        &link,
    ];
    refused_and_kept(
        &[&args[..], &["--json", s(&trace)]].concat(),
        "--json",
        &[&trace],
    );
}

#[test]
fn serve_and_proxy_will_not_log_keys_into_their_certificate_or_key() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity_in(dir.path());
    let unused = dir.path().join("unused.pem");
    let serve = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--cert",
        s(&cert),
        "--key",
        s(&key),
    ];
    refused_and_kept(
        &[&serve[..], &["--keylog", s(&key)]].concat(),
        "--keylog",
        &[&key],
    );
    let proxy = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "https://127.0.0.1:1",
        "--upstream-ca",
        s(&cert),
        "--cert-out",
        s(&unused),
    ];
    refused_and_kept(
        &[&proxy[..], &["--keylog", s(&cert)]].concat(),
        "--keylog",
        &[&cert],
    );
    // A generated certificate replacing (--force) the origin's the proxy trusts.
    let forced = [&proxy[..7], &["--cert-out", s(&cert), "--force"]].concat();
    refused_and_kept(&forced, "--cert-out", &[&cert]);
}
