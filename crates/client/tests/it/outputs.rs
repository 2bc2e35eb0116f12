//! Outputs never replace what qbench does not own: a device node, a FIFO or a link to one is
//! written through, `-` and `/dev/stdout` are stdout for every output, and two outputs that
//! name the same file are refused before anything runs.

use crate::common;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::needs::{require, Need};

const RUN: [&str; 5] = ["--proto", "h2", "--objects", "5x1KB", "--no-telemetry"];

fn run_in(dir: &Path, extra: &[&str]) -> std::process::Output {
    let out = assert_cmd::Command::cargo_bin("qbench")
        .unwrap()
        .current_dir(dir)
        .args(RUN)
        .args(extra)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A character device like /dev/null (1, 3), made where the test owns it.
fn null_device(at: &Path) {
    let c = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
    // SAFETY: mknod(2) on a path inside the test's own directory.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
}

/// The report the error says was kept in a temporary file, read and the file removed.
fn taken_back(err: &str) -> serde_json::Value {
    let kept = err
        .split("the result is kept in ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .unwrap_or_else(|| panic!("no kept file named: {err}"));
    let r = serde_json::from_slice(&std::fs::read(kept).unwrap()).unwrap();
    std::fs::remove_file(kept).unwrap();
    r
}

/// A FIFO made where the test owns it.
fn make_fifo(at: &Path) {
    let c = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a path inside the test's own directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn is_char_device(p: &Path) -> bool {
    std::fs::metadata(p).unwrap().file_type().is_char_device()
}

#[test]
fn a_device_node_given_as_an_output_stays_a_device_node() {
    require!(Need::Root);
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("null");
    null_device(&dev);
    let link = dir.path().join("to-null");
    std::os::unix::fs::symlink(&dev, &link).unwrap();
    let link_s = link.to_str().unwrap();
    let dev_s = dev.to_str().unwrap();
    let out = run_in(
        dir.path(),
        &["--json", dev_s, "--hgrm", link_s, "--log-requests", dev_s],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(is_char_device(&dev), "--json replaced the device node");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // `hgrm -o` and `merge -o` go through the same rule.
    let report = dir.path().join("r.json");
    let out = run_in(
        dir.path(),
        &["--json", report.to_str().unwrap(), "--shard", "0/1"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = report.to_str().unwrap();
    for args in [vec!["hgrm", r, "-o", dev_s], vec!["merge", r, "-o", dev_s]] {
        let out = common::qbench_plain(&args);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        assert!(is_char_device(&dev), "{args:?} replaced the device node");
    }
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "no temporary file stays: {names:?}");
}

#[test]
fn a_fifo_given_as_the_report_is_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("report.fifo");
    make_fifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = run_in(dir.path(), &["--json", fifo.to_str().unwrap()]);
    assert!(out.status.success());
    let text = reader.join().unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["complete"], true);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn dev_stdout_and_dash_are_stdout_for_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["--json", "/dev/stdout"]);
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(r["complete"], true);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("qbench h2"),
        "summary on stderr: {summary}"
    );

    let out = run_in(dir.path(), &["--hgrm", "-"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Value     Percentile"), "{text}");
    assert!(
        !text.contains("qbench h2"),
        "the summary went to stderr: {text}"
    );

    let out = run_in(dir.path(), &["--log-requests", "-"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("run\tconnection\t"), "{text}");
    assert_eq!(
        text.lines().count(),
        6,
        "a header and five requests: {text}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a file named - was created"
    );
}

#[test]
fn two_outputs_naming_one_file_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x");
    let xs = x.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--json", xs, "--hgrm", xs], "--hgrm"),
        (
            &[
                "--interval",
                "1s",
                "--json-stream",
                xs,
                "--log-requests",
                xs,
            ],
            "--json-stream",
        ),
        (&["--keylog", xs, "--json", xs], "--keylog"),
        (&["--json", "-", "--hgrm", "/dev/stdout"], "--hgrm"),
    ];
    for (args, flag) in cases {
        let out = run_in(dir.path(), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(flag),
            "{args:?}: {err}"
        );
        assert!(!x.exists(), "{args:?} wrote {xs} before refusing");
    }
    // The same file through a link counts too.
    std::fs::write(&x, "mine").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&x, &link).unwrap();
    let out = run_in(
        dir.path(),
        &["--json", xs, "--hgrm", link.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&x).unwrap(), "mine");
}

#[test]
fn a_directory_or_socket_as_an_output_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    for (flag, path) in [
        ("--json", dir.path().to_str().unwrap()),
        ("--hgrm", sock.to_str().unwrap()),
        ("--log-requests", sock.to_str().unwrap()),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_qbench"))
            .args(RUN)
            .args([flag, path])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(err.starts_with(&format!("error: {flag}")), "{err}");
    }
}

/// Found by trying the rule as an attacker would: links to paths that do not exist yet,
/// a trailing slash, modes, descriptors the shell opened, and other spellings of stdout.
#[test]
fn links_slashes_modes_and_descriptors() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A link to a file not written yet names that file: the two are one output.
    std::os::unix::fs::symlink("x", d.join("lx")).unwrap();
    let out = run_in(d, &["--json", "x", "--hgrm", "lx"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ... and written through the link, the link stays.
    let out = run_in(d, &["--json", "lx"]);
    assert!(out.status.success());
    assert!(std::fs::symlink_metadata(d.join("lx"))
        .unwrap()
        .file_type()
        .is_symlink());
    let x = std::fs::metadata(d.join("x")).unwrap();
    assert!(x.is_file());
    // 0666 less the umask (cargo's test runner: 022), as `>` would make it, not 0600.
    assert_eq!(x.permissions().mode() & 0o777, 0o644);
    // A replaced file keeps its mode.
    std::fs::set_permissions(d.join("x"), std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(run_in(d, &["--json", "x"]).status.success());
    let mode = std::fs::metadata(d.join("x")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
    // A trailing slash names a directory, refused before the run.
    let out = run_in(d, &["--json", "new/"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: --json"));
    // Another spelling of stdout is stdout.
    let out = run_in(d, &["--json", "/dev/./stdout"]);
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["complete"], true);
    // A descriptor the shell opened for appending keeps what it held.
    let log = d.join("app.log");
    std::fs::write(&log, "kept\n").unwrap();
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 3>>'{}'; '{}' {} --json /dev/fd/3 >/dev/null 2>&1",
            log.display(),
            env!("CARGO_BIN_EXE_qbench"),
            RUN.join(" ")
        ))
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("kept\n{"), "{text}");
}

/// A FIFO nobody reads does not hold qbench for ever: it waits a bounded time for a reader,
/// then fails with the report kept in a fresh file of its own.
#[test]
fn a_fifo_nobody_reads_ends_the_run_with_the_report_kept() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("nobody.fifo");
    make_fifo(&fifo);
    let out = run_in(dir.path(), &["--json", fifo.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no process read the FIFO"), "{err}");
    assert_eq!(taken_back(&err)["complete"], true);
}

#[test]
fn subcommand_outputs_that_cannot_be_written_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    assert!(run_in(dir.path(), &["--json", report.to_str().unwrap()])
        .status
        .success());
    let r = report.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    for (args, flag) in [
        (vec!["hgrm", r, "-o", d], "--out"),
        (vec!["report", d, "--html", "-"], "--html"),
        (vec!["merge", r, "-o", &format!("{d}/./r.json")], "--out"),
    ] {
        let out = common::qbench_plain(&args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.starts_with(&format!("error: {flag}")),
            "{args:?}: {}",
            out.stderr
        );
    }
}

/// Data that cannot be written fails the command: the report on a full stdout (kept in a file
/// instead, as for a file that cannot be written), and each output written as the run goes.
#[test]
fn outputs_that_cannot_take_their_data_fail_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let full = || {
        std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args(RUN)
        .args(["--json", "-"])
        .stdout(full())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("qbench did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("writing to stdout: No space left"), "{err}");
    assert_eq!(taken_back(&err)["runs"][0]["objects"]["completed"], 5);

    let report = dir.path().join("r.json");
    for (flag, more) in [
        ("--log-requests", &[][..]),
        ("--keylog", &[][..]),
        (
            "--json-stream",
            &["--duration", "1s", "--interval", "200ms"][..],
        ),
    ] {
        let args = [
            &["--json", report.to_str().unwrap(), flag, "/dev/full"][..],
            more,
        ]
        .concat();
        let out = run_in(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {err}");
        assert!(
            err.contains(&format!("error: not written whole: {flag} (")),
            "{flag}: {err}"
        );
        // The report itself is whole.
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(r["complete"], true, "{flag}");
        std::fs::remove_file(&report).unwrap();
    }
}

/// A FIFO whose reader holds it open and takes nothing: the report (about 250 KB, past the
/// pipe's 64 KB) fills the pipe, and qbench, whose write blocked its runtime's thread for
/// ever (no signal could end it), gives up after a bounded time with the report kept.
#[test]
fn a_fifo_whose_reader_takes_nothing_ends_the_run_with_the_report_kept() {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("stuck.fifo");
    make_fifo(&fifo);
    // Open, never read, until the test ends.
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let out = assert_cmd::Command::cargo_bin("qbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["--proto", "h2", "--objects", "1KB", "--duration", "1s"])
        .args(["--interval", "10ms", "--json", fifo.to_str().unwrap()])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the FIFO's reader took nothing"), "{err}");
    assert_eq!(taken_back(&err)["complete"], true);
}
