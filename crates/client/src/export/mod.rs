//! Every file and stream qbench writes goes through here: a `Format` renders a result (JSON,
//! text, SVG, HTML, Graphviz) and `export` puts it on stdout or replaces a file atomically,
//! so an interrupted run never leaves half a file behind; what is not a regular file is
//! written through or refused (`target`), never replaced.

mod escape;
pub mod hgrm;
pub mod html;
pub mod live_outputs;
pub mod live_view;
pub mod metrics;
pub mod progress;
pub mod stream;
pub mod svg;
pub mod text;
pub mod tui;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use qbench_engine::files as target;
use serde::Serialize;

/// Where an output goes: `-` (or `/dev/stdout`) is stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    Stdout,
    File(PathBuf),
}

impl Dest {
    pub fn parse(s: &str) -> Self {
        let path = PathBuf::from(s);
        match target::resolve(&path) {
            Ok(target::Target::Stdout) => Self::Stdout,
            _ => Self::File(path),
        }
    }

    /// The file, if it may be written again and again as results come in: a regular file (or
    /// a new path). A device or FIFO gets the final result alone, once: a FIFO's reader sees
    /// one document, and a second open would wait for a reader that has gone.
    pub fn rewritable(&self) -> Option<&PathBuf> {
        match self {
            Self::File(p) => {
                matches!(target::resolve(p), Ok(target::Target::Replace(_))).then_some(p)
            }
            Self::Stdout => None,
        }
    }
}

/// Whether `path` may be written again and again as results come in (see `Dest::rewritable`).
pub fn rewritable(path: &Path) -> bool {
    Dest::File(path.to_path_buf()).rewritable().is_some()
}

/// Renders one kind of result into bytes.
pub trait Format<T: ?Sized> {
    fn render(&self, value: &T) -> anyhow::Result<Vec<u8>>;
}

/// Pretty JSON with a final newline.
pub struct Json;

impl<T: Serialize + ?Sized> Format<T> for Json {
    fn render(&self, value: &T) -> anyhow::Result<Vec<u8>> {
        let mut out = serde_json::to_vec_pretty(value)?;
        out.push(b'\n');
        Ok(out)
    }
}

/// Text that is already rendered (SVG, HTML, Graphviz).
pub struct Raw;

impl Format<str> for Raw {
    fn render(&self, value: &str) -> anyhow::Result<Vec<u8>> {
        Ok(value.as_bytes().to_vec())
    }
}

pub fn export<T: ?Sized>(format: &impl Format<T>, value: &T, dest: &Dest) -> anyhow::Result<()> {
    let bytes = format.render(value)?;
    match dest {
        Dest::Stdout => crate::console::out_data(&bytes).context("writing to stdout"),
        Dest::File(path) => write_atomic(path, &bytes),
    }
}

/// Writes `bytes` to `path` as `target::resolve` decides: a regular file or new path is
/// replaced atomically, a device or FIFO written through, anything else refused.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let t = target::resolve(path)?;
    match target::write_file(&t, bytes) {
        Some(written) => written,
        None if t == target::Target::Stdout => {
            crate::console::out_data(bytes).context("writing to stdout")
        }
        None => {
            crate::console::err(&String::from_utf8_lossy(bytes));
            Ok(())
        }
    }
}

/// Writes a JSON result. If its file cannot be written, the result is kept in the system's
/// temporary directory and the error names where: a long run's data is never lost to a full
/// disk or a vanished directory.
pub fn write_json<T: Serialize + ?Sized>(dest: &Dest, value: &T) -> anyhow::Result<()> {
    let Err(e) = export(&Json, value, dest) else {
        return Ok(());
    };
    let kept = keep(&Json.render(value)?);
    match kept {
        Ok(kept) => Err(e.context(format!("the result is kept in {}", kept.display()))),
        Err(_) => Err(e),
    }
}

/// Keeps `bytes` in this process's own file in the system's temporary directory: created
/// once under a fresh name, exclusively (in a directory everyone may write to, a name known in
/// advance could be a link planted to make qbench, as root, overwrite another file), then
/// rewritten through the descriptor it was created with, so that a run whose report cannot be
/// written run after run keeps one file, the latest.
fn keep(bytes: &[u8]) -> anyhow::Result<PathBuf> {
    use std::io::{Seek, SeekFrom};
    static KEPT: std::sync::Mutex<Option<(PathBuf, std::fs::File)>> = std::sync::Mutex::new(None);
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if kept.is_none() {
        let f = tempfile::Builder::new()
            .prefix("qbench-result-")
            .suffix(".json")
            .tempfile()?;
        let (file, path) = f.keep()?;
        *kept = Some((path, file));
    }
    let (path, file) = kept.as_mut().expect("created above");
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(path.clone())
}

/// Writes a rendered text to a file atomically.
pub fn write_text(path: &Path, text: &str) -> anyhow::Result<()> {
    export(&Raw, text, &Dest::File(path.to_path_buf()))
}

/// A human summary goes to stdout, or to stderr when the JSON report takes stdout.
pub fn print_text(text: &str, json: Option<&Dest>) {
    if json == Some(&Dest::Stdout) {
        crate::console::err(text);
    } else {
        crate::console::out(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_replaced_whole_and_no_temp_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "old").unwrap();
        write_json(&Dest::File(path.clone()), &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\n  \"a\": 1\n}\n"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the file itself");
        let err = write_text(&dir.path().join("missing/x.svg"), "<svg/>").unwrap_err();
        assert!(format!("{err:#}").contains("missing"), "{err:#}");
        assert_eq!(Dest::parse("-"), Dest::Stdout);
    }
}
