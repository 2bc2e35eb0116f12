//! An output that is one of the files its command reads would replace what it reads, under
//! any of its names (`./r.json`, a symbolic link, a hard link): outputs are held against
//! inputs by device and inode before anything is read or written.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::error::ConfigError;

/// (device, inode) of the file `path` names, following links; `None` for a path that does
/// not exist (nothing there to lose) and for a character device, which reading and writing
/// share harmlessly (`/dev/null`, a terminal).
fn file_id(path: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    (!m.file_type().is_char_device()).then(|| (m.dev(), m.ino()))
}

/// Fails, naming the output's flag and the input's, if an output is the same file as an
/// input. `outputs` and `inputs` pair a flag (or an argument's name, `REPORT`) with its
/// path; `-` as an output is stdout, which the shell opened before the command ran.
pub fn check_not_inputs(
    outputs: &[(&'static str, &Path)],
    inputs: &[(&str, &Path)],
) -> Result<(), ConfigError> {
    let inputs: Vec<_> = inputs
        .iter()
        .filter_map(|&(what, p)| Some((what, p, file_id(p)?)))
        .collect();
    for &(flag, out) in outputs {
        if out == Path::new("-") {
            continue;
        }
        let Some(id) = file_id(out) else { continue };
        if let Some((what, input, _)) = inputs.iter().find(|(_, _, i)| *i == id) {
            let same = if out == *input {
                String::new()
            } else {
                format!(" ({})", input.display())
            };
            return Err(ConfigError {
                flag,
                message: format!(
                    "{} is also {what}{same}, an input it would replace: write the output elsewhere",
                    out.display()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_under_any_name_is_refused_as_an_output() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("r.json");
        std::fs::write(&input, "{}").unwrap();
        let err = check_not_inputs(&[("--out", &input)], &[("REPORT", &input)]).unwrap_err();
        assert_eq!(err.flag, "--out");
        assert!(err.message.contains("REPORT"), "{}", err.message);
        let dotted = dir.path().join(".").join("r.json");
        let hard = dir.path().join("hard.json");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = dir.path().join("soft.json");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        for other in [&dotted, &hard, &soft] {
            let err = check_not_inputs(&[("--html", other)], &[("--ca", &input)]).unwrap_err();
            assert_eq!(err.flag, "--html", "{}", other.display());
            assert!(err.message.contains("--ca"), "{}", err.message);
        }
        // A new file, another file, stdout and a device shared by both are no input's.
        let new = dir.path().join("new.json");
        let null = Path::new("/dev/null");
        check_not_inputs(
            &[
                ("--out", &new),
                ("--json", Path::new("-")),
                ("--hgrm", null),
            ],
            &[("REPORT", &input), ("--page", null)],
        )
        .unwrap();
        // An input that does not exist is no output's.
        check_not_inputs(&[("--out", &input)], &[("REPORT", &new)]).unwrap();
    }
}
