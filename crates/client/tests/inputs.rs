//! Every file qbench reads is read within a size limit that holds while reading: an endless
//! input (`/dev/zero`, a FIFO) is refused with a one-line error naming the file and the
//! limit, instead of being read until memory runs out.

mod common;

#[test]
fn an_endless_input_is_refused_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &["merge", "/dev/zero", "-o", out],
            "268435456 bytes, the limit for a report",
        ),
        (&["hgrm", "/dev/zero"], "the limit for a report"),
        (
            &["sweep", "/dev/zero", "--out", out],
            "the limit for a scenario",
        ),
        (&["--page", "/dev/zero"], "the limit for a HAR file"),
        (
            &["--ca", "/dev/zero", "--target", "https://127.0.0.1:9"],
            "the limit for a PEM file",
        ),
        (
            &["--link", "rate=trace:/dev/zero", "--objects", "1x1KB"],
            "the limit for a rate trace",
        ),
    ];
    for (args, says) in cases {
        // SAFETY: geteuid(2) only reads this process's user id.
        if args[0] == "--link" && unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped {args:?}: a link needs root (CI has it)");
            continue;
        }
        let r = common::qbench_within(args, 60);
        let first = r.stderr.lines().next().unwrap_or_default();
        assert_ne!(r.code, Some(0), "{args:?}: {}", r.stderr);
        assert_ne!(r.code, Some(101), "{args:?} panicked: {}", r.stderr);
        assert!(
            first.starts_with("error: ") && first.contains("/dev/zero") && first.contains(says),
            "{args:?}: {}",
            r.stderr
        );
    }
}
