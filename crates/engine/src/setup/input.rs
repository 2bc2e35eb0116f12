//! Files the user names, read with the size limit of their kind (`qbench_core::spec::input`):
//! the error names the file and, past the limit, the limit.

use std::path::Path;

use qbench_core::spec::input::read_text_capped;

/// Reads `path` as text of at most `cap` bytes; the error is one line naming the file.
pub fn read_text(path: &Path, cap: u64, what: &'static str) -> Result<String, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    read_text_capped(file, cap, what).map_err(|e| format!("{shown}: {e}"))
}

/// Reads `path` as bytes of at most `cap`; the error is one line naming the file.
pub fn read_bytes(path: &Path, cap: u64, what: &'static str) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    qbench_core::spec::input::read_capped(file, cap, what).map_err(|e| format!("{shown}: {e}"))
}
