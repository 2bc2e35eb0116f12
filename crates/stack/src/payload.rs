//! Response bodies come from one shared static buffer: a response of n bytes is a sequence of
//! reference-counted slices of it, so serving costs no allocation proportional to n.

use std::sync::OnceLock;

use bytes::Bytes;
use qbench_core::wire::{payload_byte, PAYLOAD_PATTERN};

/// Size of the shared buffer, and the largest chunk handed to a transport at once.
pub const CHUNK: usize = 256 * 1024;

static BUF: OnceLock<Bytes> = OnceLock::new();

fn shared() -> &'static Bytes {
    BUF.get_or_init(|| {
        let v: Vec<u8> = (0..CHUNK as u64).map(payload_byte).collect();
        Bytes::from(v)
    })
}

/// Chunks of a response body of `len` bytes. `CHUNK` is a multiple of the pattern length, so
/// the concatenation is the pattern repeated.
#[derive(Debug, Clone)]
pub struct Chunks {
    remaining: u64,
}

impl Chunks {
    pub fn new(len: u64) -> Self {
        Self { remaining: len }
    }

    pub fn remaining(&self) -> u64 {
        self.remaining
    }
}

impl Iterator for Chunks {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.remaining == 0 {
            return None;
        }
        let n = self.remaining.min(CHUNK as u64) as usize;
        self.remaining -= n as u64;
        Some(shared().slice(..n))
    }
}

/// `chunk` as a reference into the shared buffer when it lies within it (a payload chunk
/// handed back by h3), so that a transport can pass it on without copying.
pub fn share(chunk: &[u8]) -> Option<Bytes> {
    // Not built here: a client's requests must not build the server's buffer.
    let buf = BUF.get()?;
    let (start, end) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
    let at = chunk.as_ptr() as usize;
    (!chunk.is_empty() && at >= start && at + chunk.len() <= end).then(|| buf.slice_ref(chunk))
}

const _: () = assert!(CHUNK.is_multiple_of(PAYLOAD_PATTERN.len()));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_exact_length_with_pattern() {
        for len in [0u64, 1, 63, 64, CHUNK as u64, CHUNK as u64 * 3 + 17] {
            let mut offset = 0u64;
            for c in Chunks::new(len) {
                for (i, b) in c.iter().enumerate() {
                    assert_eq!(*b, payload_byte(offset + i as u64));
                }
                offset += c.len() as u64;
            }
            assert_eq!(offset, len);
        }
    }

    #[test]
    fn only_slices_of_the_shared_buffer_are_shared() {
        let c = Chunks::new(1000).next().unwrap();
        let s = share(&c[10..20]).unwrap();
        assert_eq!((s.as_ptr(), &s[..]), (c[10..].as_ptr(), &c[10..20]));
        let copy = c.to_vec();
        assert!(share(&copy).is_none());
        assert!(share(&[]).is_none());
    }

    #[test]
    fn chunks_share_one_buffer() {
        let a = Chunks::new(10).next().unwrap();
        let b = Chunks::new(10).next().unwrap();
        assert_eq!(a.as_ptr(), b.as_ptr());
    }
}
