//! The processes one test started, told apart from everyone else's by an environment variable
//! their parent passes down. A test that looks for processes it left running must not judge
//! a test beside it, or another suite on the host, that runs the same program (`sleep 60`, a
//! browser): a command-line pattern cannot tell them apart, an inherited mark can.

use std::ffi::OsStr;

/// The variable every process the test starts inherits.
pub const VAR: &str = "QBENCH_TEST_MARK";

/// One test's mark: `VAR=value`, with a value no other test in any process has.
pub struct Mark {
    value: String,
}

impl Default for Mark {
    fn default() -> Self {
        Self::new()
    }
}

impl Mark {
    pub fn new() -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static MADE: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let made = MADE.fetch_add(1, Ordering::Relaxed);
        Self {
            value: format!("{}-{made}-{nanos}", std::process::id()),
        }
    }

    /// `(VAR, value)`, to set on the command the test starts.
    pub fn env(&self) -> (&'static str, &OsStr) {
        (VAR, OsStr::new(&self.value))
    }

    /// `pid: command line` of each live process that carries this mark.
    pub fn running(&self) -> Vec<String> {
        let wanted = format!("{VAR}={}", self.value);
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            // Gone meanwhile, or a zombie (whose environment reads empty): not running.
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if environ.split(|&b| b == 0).any(|kv| kv == wanted.as_bytes()) {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                found.push(format!("{pid}: {}", cmdline.trim_end()));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child started with the mark is found while it runs and not after; one started with
    /// another mark, or none, is never found.
    #[test]
    fn a_marked_child_is_found_while_it_runs() {
        let _turn = crate::FORK_TURN.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, theirs) = (Mark::new(), Mark::new());
        let (var, value) = mine.env();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(var, value)
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .env(var, theirs.env().1)
            .spawn()
            .unwrap();
        // The parent goes on once the child's exec has begun, before the kernel has laid out
        // the new program's environment: until then /proc/PID/environ reads empty. Look
        // again for up to 2 s.
        let seen = |m: &Mark| {
            let mut found = m.running();
            for _ in 0..200 {
                if !found.is_empty() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
                found = m.running();
            }
            found
        };
        let found = seen(&mine);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with(&format!("{}: sleep 30", child.id())));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(mine.running().is_empty());
        assert_eq!(seen(&theirs).len(), 1);
        other.kill().unwrap();
        other.wait().unwrap();
        assert!(theirs.running().is_empty());
    }
}
