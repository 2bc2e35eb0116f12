//! `qbench sweep` and `qbench report` as the tests run them.

use std::path::{Path, PathBuf};

/// Sweeps scenario `file` into `out`: whether it succeeded, stdout and stderr.
pub(crate) fn sweep(file: &Path, out: &Path) -> (bool, String, String) {
    let (file, out) = (file.to_str().unwrap(), out.to_str().unwrap());
    let c = super::qbench_within(&["sweep", file, "--out", out], 300);
    (c.code == Some(0), c.stdout, c.stderr)
}

/// Writes scenario `text` as `name` into `dir` and sweeps it into `dir/out`, which must
/// succeed; returns the scenario file, the out directory and stdout.
pub(crate) fn swept(dir: &Path, name: &str, text: &str) -> (PathBuf, PathBuf, String) {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let out = dir.join("out");
    let (ok, stdout, stderr) = sweep(&file, &out);
    assert!(ok, "{stderr}");
    (file, out, stdout)
}

/// `qbench report DIR --html PAGE` and `extra` flags.
pub(crate) fn report_with(dir: &Path, page: &Path, extra: &[&str]) -> super::Captured {
    let (dir, page) = (dir.to_str().unwrap(), page.to_str().unwrap());
    super::qbench_plain(&[&["report", dir, "--html", page][..], extra].concat())
}

/// `qbench report DIR --html PAGE` succeeded.
pub(crate) fn report(dir: &Path, page: &Path) {
    let c = report_with(dir, page, &[]);
    assert_eq!(c.code, Some(0), "{}", c.stderr);
}
