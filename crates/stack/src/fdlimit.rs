//! File descriptors: the limit raised at start, and what the accept loop does when it is hit.

use std::io;
use std::time::Duration;

/// How long the accept loop waits after running out of descriptors (or memory) before trying
/// again: long enough not to spin, short enough that a freed descriptor is used soon.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns (old soft, new soft).
pub fn raise_fd_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(io::Error::last_os_error());
        }
        let old = lim.rlim_cur;
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok((old, lim.rlim_cur))
    }
}

/// What an `accept()` error means for the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptError {
    /// One connection failed before we got it (reset, aborted): go on at once.
    Connection,
    /// The process or system is out of descriptors or memory: wait, or we spin.
    Exhausted,
    /// Anything else: wait too, since retrying at once could spin.
    Other,
}

pub fn classify(e: &io::Error) -> AcceptError {
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => AcceptError::Exhausted,
        Some(libc::ECONNABORTED | libc::ECONNRESET | libc::EPROTO | libc::EPERM) => {
            AcceptError::Connection
        }
        _ => AcceptError::Other,
    }
}

/// Counts failed accepts so that a burst of them is logged once, when it starts, and once
/// more when accepting works again.
#[derive(Debug, Default)]
pub struct Burst {
    failures: u64,
}

impl Burst {
    /// Records a failure; true when it starts a burst (the caller logs it).
    pub fn fail(&mut self) -> bool {
        self.failures += 1;
        self.failures == 1
    }

    /// Records a success; returns how many failures the burst that just ended had.
    pub fn ok(&mut self) -> Option<u64> {
        (self.failures > 0).then(|| std::mem::take(&mut self.failures))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhaustion_is_told_from_one_bad_connection() {
        let e = |n| io::Error::from_raw_os_error(n);
        assert_eq!(classify(&e(libc::EMFILE)), AcceptError::Exhausted);
        assert_eq!(classify(&e(libc::ENFILE)), AcceptError::Exhausted);
        assert_eq!(classify(&e(libc::ECONNABORTED)), AcceptError::Connection);
        assert_eq!(classify(&e(libc::EINVAL)), AcceptError::Other);
    }

    #[test]
    fn a_burst_is_logged_once() {
        let mut b = Burst::default();
        assert_eq!(b.ok(), None);
        assert!(b.fail());
        assert!(!b.fail());
        assert!(!b.fail());
        assert_eq!(b.ok(), Some(3));
        assert!(b.fail());
    }

    #[test]
    fn raising_never_lowers() {
        let (old, new) = raise_fd_limit().unwrap();
        assert!(new >= old);
    }
}
