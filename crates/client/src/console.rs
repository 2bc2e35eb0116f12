//! Lines for the user on stdout and stderr. A closed pipe (`qbench sweep ... | head -1`) is
//! not an error: the first write that finds it closed marks the console closed, loops over runs
//! and cells stop at their next check, and once everything is torn down the program ends the
//! way a process killed by SIGPIPE does (status 141 in a shell), without a word. While the live
//! view owns the terminal, lines are held and shown when it ends.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Lines for the user kept back while a full-screen view owns the terminal, in the order
/// written, and shown when it ends.
struct Held {
    lines: Vec<(Stream, String)>,
    bytes: usize,
    /// Lines beyond `HELD_MAX` bytes, not kept.
    lost: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Out,
    Err,
}

/// Bytes of held lines kept: a view that lasts hours with a warning a second cannot grow
/// memory without end.
const HELD_MAX: usize = 1 << 20;

static HELD: std::sync::Mutex<Option<Held>> = std::sync::Mutex::new(None);

fn held() -> std::sync::MutexGuard<'static, Option<Held>> {
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// From now on, lines for the user are kept back (see `release`): a full-screen view owns the
/// terminal.
pub fn hold() {
    let mut h = held();
    if h.is_none() {
        *h = Some(Held {
            lines: Vec::new(),
            bytes: 0,
            lost: 0,
        });
    }
}

/// Writes the lines kept back since `hold`, in order, and writes directly again.
pub fn release() {
    let Some(h) = held().take() else {
        return;
    };
    for (stream, text) in h.lines {
        match stream {
            Stream::Out => write(io::stdout().lock(), text.as_bytes()),
            Stream::Err => write(io::stderr().lock(), text.as_bytes()),
        }
    }
    if h.lost > 0 {
        let line = format!(
            "warning: {} more lines were not kept while the live view was shown\n",
            h.lost
        );
        write(io::stderr().lock(), line.as_bytes());
    }
}

/// The last `n` lines kept back, oldest first, for the view to show.
pub fn recent(n: usize) -> Vec<String> {
    held().as_ref().map_or_else(Vec::new, |h| {
        let from = h.lines.len().saturating_sub(n);
        h.lines[from..]
            .iter()
            .flat_map(|(_, t)| t.lines().map(str::to_string))
            .collect()
    })
}

/// Keeps `text` back if a view holds the terminal; false if it is to be written now.
fn kept(stream: Stream, text: &str) -> bool {
    let mut h = held();
    let Some(h) = h.as_mut() else {
        return false;
    };
    if h.bytes + text.len() > HELD_MAX {
        h.lost += 1;
    } else {
        h.bytes += text.len();
        h.lines.push((stream, text.to_string()));
    }
    true
}

fn write(mut to: impl Write, bytes: &[u8]) {
    if let Err(e) = to.write_all(bytes).and_then(|()| to.flush()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CLOSED.store(true, Ordering::Relaxed);
        }
        // Any other failure to print is not worth failing a measurement for either.
    }
}

/// Writes `text` to stdout.
pub fn out(text: &str) {
    if kept(Stream::Out, text) {
        return;
    }
    out_bytes(text.as_bytes());
}

/// Writes `bytes` (a JSON report, say) to stdout.
pub fn out_bytes(bytes: &[u8]) {
    write(io::stdout().lock(), bytes);
}

/// Writes data asked for (a report) to stdout. Unlike a line for the user, data that cannot be
/// written is an error (`--json - >/dev/full`); a closed pipe still ends the program as
/// SIGPIPE would.
pub fn out_data(bytes: &[u8]) -> io::Result<()> {
    let mut to = io::stdout().lock();
    match to.write_all(bytes).and_then(|()| to.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        other => other,
    }
}

/// Writes `text` to stderr.
pub fn err(text: &str) {
    if kept(Stream::Err, text) {
        return;
    }
    write(io::stderr().lock(), text.as_bytes());
}

/// Whoever reads our output has gone.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Ends the process as SIGPIPE's default action would, if the console was found closed.
pub fn exit_if_closed() {
    if closed() {
        // SAFETY: restoring a default disposition and raising a signal at ourselves.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::raise(libc::SIGPIPE);
        }
    }
}

/// Warnings from the engine on stderr, for an output the command writes itself.
pub struct Stderr;

impl qbench_engine::observe::Observer for Stderr {
    fn warn(&self, line: &str) {
        err(&format!("{line}\n"));
    }
}

/// `text` with every control character but newlines and tabs escaped (`\u{1b}`): text that
/// came from a file anyone can edit (a shard's hostname or error) cannot move the cursor,
/// retitle the terminal or hide a line.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `println!` that survives a closed stdout.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::console::out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that survives a closed stderr.
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {
        $crate::console::err(&format!("{}\n", format_args!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_lines_kept() {
        assert_eq!(
            printable("host\x1b]0;owned\x07\nnext\tcol"),
            "host\\u{1b}]0;owned\\u{7}\nnext\tcol"
        );
    }
}
