//! A client's stdout and stderr, read from pipes as they stream: nothing of them is written
//! to disk (a chatty client once filled TMPDIR), stdout keeps whole lines up to a bound and
//! counts the lines past it, stderr keeps its tail.

use std::io::Read;
use std::sync::{Arc, Mutex};

/// Longest stdout a client may leave for qbench to read, per process: whole lines up to it
/// are kept, the rest counted. A line of curl's `%{json}` is about 1.3 KB: 50,000 transfers
/// in one process.
pub(super) const MAX_STDOUT: usize = qbench_core::client_program::lines::MAX_STDOUT;
/// Bytes of stderr kept for the report when a process fails.
pub(super) const STDERR_TAIL: usize = 2048;

/// What was kept of one stream.
#[derive(Debug, Default)]
pub(super) struct Kept {
    pub text: Vec<u8>,
    /// Lines, whole or not, past the bound (stdout), or bytes dropped before the tail
    /// (stderr).
    pub cut: u64,
}

/// Keeps whole lines of `r` up to `cap` bytes, and counts the lines past it; a line longer
/// than what is left of `cap` is counted whole, never kept in part.
pub(super) fn lines(mut r: impl Read, kept: &Arc<Mutex<Kept>>, cap: usize) {
    let mut buf = vec![0u8; 64 * 1024];
    // The line being read, and whether it has already passed the bound.
    let mut line = Vec::new();
    let mut over = false;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut k = lock(kept);
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            let (part, ends) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..=i], true),
                None => (rest, false),
            };
            rest = &rest[part.len()..];
            if !over && k.text.len() + line.len() + part.len() <= cap {
                line.extend_from_slice(part);
            } else {
                over = true;
                line.clear();
            }
            if ends {
                match over {
                    true => k.cut += 1,
                    false => k.text.append(&mut line),
                }
                over = false;
            }
        }
    }
    // A last line without its newline is whole at the end of the stream.
    let mut k = lock(kept);
    match over {
        true => k.cut += 1,
        false => k.text.append(&mut line),
    }
}

/// Keeps the last `cap` bytes of `r`.
pub(super) fn tail(mut r: impl Read, kept: &Arc<Mutex<Kept>>, cap: usize) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut k = lock(kept);
        k.text.extend_from_slice(&buf[..n]);
        if k.text.len() > 2 * cap {
            let drop = k.text.len() - cap;
            k.text.drain(..drop);
            k.cut += drop as u64;
        }
    }
}

/// What was kept so far: the reader may still be reading from a process that left the group
/// with the pipe open.
pub(super) fn take(kept: &Arc<Mutex<Kept>>) -> Kept {
    std::mem::take(&mut *lock(kept))
}

fn lock(kept: &Arc<Mutex<Kept>>) -> std::sync::MutexGuard<'_, Kept> {
    kept.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_lines(input: &[u8], cap: usize) -> Kept {
        let k = Arc::new(Mutex::new(Kept::default()));
        lines(input, &k, cap);
        take(&k)
    }

    #[test]
    fn whole_lines_up_to_the_bound_are_kept_and_the_rest_counted() {
        let k = read_lines(b"aaaa\nbbbb\ncccc\nddd", 12);
        assert_eq!((k.text.as_slice(), k.cut), (&b"aaaa\nbbbb\n"[..], 2));
        // A long line past the bound does not hide a short one after it.
        let k = read_lines(b"a\nbbbbbbbbbbbbbbbbbbbb\nc\n", 6);
        assert_eq!((k.text.as_slice(), k.cut), (&b"a\nc\n"[..], 1));
        let k = read_lines(b"end", 3);
        assert_eq!((k.text.as_slice(), k.cut), (&b"end"[..], 0));
    }

    #[test]
    fn a_tail_is_its_last_bytes() {
        let k = Arc::new(Mutex::new(Kept::default()));
        let input: Vec<u8> = (0..100u8).collect();
        tail(&input[..], &k, 10);
        let k = take(&k);
        assert!(k.text.ends_with(&[95, 96, 97, 98, 99]));
        assert!(k.text.len() <= 20);
        assert_eq!(k.cut as usize + k.text.len(), 100);
    }

    proptest! {
        #[test]
        fn kept_text_is_whole_lines_within_the_bound(
            input in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'x')], 0..300),
            cap in 0usize..64,
        ) {
            let k = read_lines(&input, cap);
            prop_assert!(k.text.len() <= cap);
            let total = input.split(|&b| b == b'\n').count()
                - usize::from(input.last() == Some(&b'\n') || input.is_empty());
            let kept = k.text.split(|&b| b == b'\n').count()
                - usize::from(k.text.last() == Some(&b'\n') || k.text.is_empty());
            prop_assert_eq!(kept as u64 + k.cut, total as u64);
            // Every kept line is one of the input's, in order.
            let text = String::from_utf8(k.text).unwrap();
            prop_assert!(text.split('\n').all(|l| l.chars().all(|c| c == 'x')));
        }
    }
}
