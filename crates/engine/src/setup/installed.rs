//! Where qbench's own files for third-party programs are (the Chromium driver, hypercorn's
//! file-serving app): given by an environment variable, installed beside the binary, or in a
//! share directory beside its `bin`. Never the source tree it was built from: qbench usually
//! runs as root (for links), and a checkout that is later removed leaves that path to anyone.
//! Whatever is found runs only when no one but root and the user running qbench could have
//! written it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The Chromium driver, relative to the directories it is looked for in.
pub(crate) const CHROMIUM_DRIVER: &str = "clients/chromium/fetch.py";
pub(crate) const CHROMIUM_ENV: &str = "QBENCH_CHROMIUM_DRIVER";
/// hypercorn's application that serves the run's files.
pub(crate) const HYPERCORN_APP: &str = "servers/hypercorn/qbench_files.py";
pub(crate) const HYPERCORN_ENV: &str = "QBENCH_HYPERCORN_APP";

/// Where `file` is looked for, first found first: `env`'s path, then beside the binary, then
/// `../share/qbench/` from the binary's directory.
pub(crate) fn candidates(file: &str, env: &str) -> Vec<PathBuf> {
    if let Some(v) = std::env::var_os(env) {
        return vec![PathBuf::from(v)];
    }
    let Some(bin) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    vec![bin.join(file), bin.join("../share/qbench").join(file)]
}

/// `path` is a regular file that only root or this user could have written: it and every
/// directory above it owned by one of them, and none writable by group or others (a sticky
/// directory, as /tmp, excepted: what lies in it is then checked by its own owner).
pub(crate) fn trusted(path: &Path) -> Result<(), String> {
    // SAFETY: a plain getter.
    let me = unsafe { libc::geteuid() };
    let real = path
        .canonicalize()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = std::fs::metadata(&real).map_err(|e| format!("{}: {e}", real.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", real.display()));
    }
    let mut at = Some(real.as_path());
    while let Some(p) = at {
        let m = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let sticky = m.is_dir() && m.mode() & libc::S_ISVTX != 0;
        if m.uid() != 0 && m.uid() != me {
            return Err(format!("{} is owned by uid {}", p.display(), m.uid()));
        }
        if m.mode() & 0o022 != 0 && !sticky {
            return Err(format!("{} is writable by group or others", p.display()));
        }
        at = p.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_driver_others_could_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("fetch.py");
        std::fs::write(&d, "print()").unwrap();
        let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        mode(dir.path(), 0o755).unwrap();
        mode(&d, 0o644).unwrap();
        assert_eq!(trusted(&d), Ok(()));
        mode(&d, 0o666).unwrap();
        assert!(trusted(&d).unwrap_err().contains("writable"));
        mode(&d, 0o644).unwrap();
        mode(dir.path(), 0o777).unwrap();
        assert!(trusted(&d).unwrap_err().contains("writable"));
        mode(dir.path(), 0o755).unwrap();
        assert!(trusted(dir.path()).unwrap_err().contains("regular"));
        assert!(trusted(&dir.path().join("missing")).is_err());
    }
}
