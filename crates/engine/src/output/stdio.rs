//! Bytes for stdout and stderr. A closed pipe (`qbench sweep ... | head -1`) is
//! not an error: the first write that finds it closed marks the console closed, loops over runs
//! and cells stop at their next check, and once everything is torn down the program ends the
//! way a process killed by SIGPIPE does (status 141 in a shell), without a word.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

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
