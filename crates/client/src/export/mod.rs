//! Every file and stream qbench writes goes through here: a `Format` renders a result (JSON,
//! text, SVG, HTML, Graphviz) and `export` puts it on stdout or replaces a file atomically,
//! so an interrupted run never leaves half a file behind.

mod heatmap;
pub mod html;
pub mod svg;
pub mod text;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

/// Where an output goes: `-` is stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    Stdout,
    File(PathBuf),
}

impl Dest {
    pub fn parse(s: &str) -> Self {
        match s {
            "-" => Self::Stdout,
            p => Self::File(PathBuf::from(p)),
        }
    }
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
        Dest::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
            Ok(())
        }
        Dest::File(path) => write_atomic(path, &bytes),
    }
}

pub fn write_json<T: Serialize + ?Sized>(dest: &Dest, value: &T) -> anyhow::Result<()> {
    export(&Json, value, dest)
}

/// Writes a rendered text to a file atomically.
pub fn write_text(path: &Path, text: &str) -> anyhow::Result<()> {
    export(&Raw, text, &Dest::File(path.to_path_buf()))
}

/// Temp file beside `path`, fsync, rename: readers see the old file or the new one, never a
/// part, and a crash leaves at most a hidden temp file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", tmp.display()));
    }
    std::fs::rename(&tmp, path).with_context(|| {
        let _ = std::fs::remove_file(&tmp);
        format!("renaming onto {}", path.display())
    })
}

/// A human summary goes to stdout, or to stderr when the JSON report takes stdout.
pub fn print_text(text: &str, json: Option<&Dest>) {
    if json == Some(&Dest::Stdout) {
        eprint!("{text}");
    } else {
        print!("{text}");
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
