//! TLS secrets written for Wireshark, by either end.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// TLS secrets as NSS key log lines (the `SSLKEYLOGFILE` format Wireshark reads), appended
/// to a file: a key log is added to, never replaced.
pub struct KeyLogTo {
    path: PathBuf,
    file: std::sync::Mutex<std::fs::File>,
    /// The first write that failed: a key log missing secrets decrypts only some connections.
    failed: std::sync::Mutex<Option<String>>,
}

impl KeyLogTo {
    pub fn open(path: &Path) -> std::io::Result<Arc<Self>> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Arc::new(Self {
            path: path.to_path_buf(),
            file: std::sync::Mutex::new(file),
            failed: std::sync::Mutex::new(None),
        }))
    }

    /// The first write that failed, naming the file.
    pub fn failure(&self) -> Option<String> {
        self.failed.lock().ok().and_then(|f| f.clone())
    }
}

impl std::fmt::Debug for KeyLogTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyLogTo({})", self.path.display())
    }
}

impl rustls::KeyLog for KeyLogTo {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let line = format!("{label} {} {}\n", hex(client_random), hex(secret));
        // One write per line on an O_APPEND file: lines of concurrent writers do not mix.
        if let Ok(mut f) = self.file.lock() {
            if let Err(e) = std::io::Write::write_all(&mut *f, line.as_bytes()) {
                if let Ok(mut failed) = self.failed.lock() {
                    failed.get_or_insert_with(|| format!("{}: {e}", self.path.display()));
                }
            }
        }
    }
}
