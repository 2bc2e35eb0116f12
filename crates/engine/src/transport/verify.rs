//! `--verify`: body content checks. Objects from a qbench server must match the payload
//! pattern byte for byte; arbitrary URLs are hashed (SHA-256) and every fetch of one URL must
//! produce the same digest.

use std::collections::BTreeMap;
use std::sync::Mutex;

use qbench_core::wire::check_payload;
use sha2::{Digest, Sha256};

pub(crate) enum Check {
    /// Offset into the body so far, and the first mismatch seen.
    Pattern {
        offset: u64,
        mismatch: Option<u64>,
    },
    Digest(Box<Sha256>),
}

impl Check {
    pub(crate) fn pattern() -> Self {
        Self::Pattern {
            offset: 0,
            mismatch: None,
        }
    }

    pub(crate) fn digest() -> Self {
        Self::Digest(Box::default())
    }

    pub(crate) fn update(&mut self, chunk: &[u8]) {
        match self {
            Self::Pattern { offset, mismatch } => {
                if mismatch.is_none() {
                    *mismatch = check_payload(*offset, chunk).err();
                }
                *offset += chunk.len() as u64;
            }
            Self::Digest(h) => h.update(chunk),
        }
    }

    /// `Err(offset)` of the first wrong byte, or the hex digest for hashed bodies.
    pub(crate) fn finish(self) -> Result<Option<String>, u64> {
        match self {
            Self::Pattern {
                mismatch: Some(at), ..
            } => Err(at),
            Self::Pattern { .. } => Ok(None),
            Self::Digest(h) => Ok(Some(
                h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
            )),
        }
    }
}

/// Digests seen per URL within one run.
#[derive(Debug, Default)]
pub(crate) struct DigestBook {
    seen: Mutex<BTreeMap<String, String>>,
}

impl DigestBook {
    /// Records `digest` for `url`; returns the earlier, different digest if there was one.
    pub(crate) fn record(&self, url: &str, digest: &str) -> Option<String> {
        let mut seen = self.seen.lock().expect("digest lock");
        match seen.get(url) {
            Some(prev) if prev != digest => Some(prev.clone()),
            Some(_) => None,
            None => {
                seen.insert(url.to_string(), digest.to_string());
                None
            }
        }
    }

    pub(crate) fn into_map(self) -> BTreeMap<String, String> {
        self.seen.into_inner().expect("digest lock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qbench_core::wire::payload_byte;

    #[test]
    fn pattern_accepts_server_bodies_split_anywhere() {
        let body: Vec<u8> = (0..1000).map(payload_byte).collect();
        for split in [1usize, 7, 63, 64, 65, 999] {
            let mut c = Check::pattern();
            for part in body.chunks(split) {
                c.update(part);
            }
            assert_eq!(c.finish(), Ok(None));
        }
    }

    #[test]
    fn pattern_reports_first_wrong_byte() {
        let mut body: Vec<u8> = (0..300).map(payload_byte).collect();
        body[130] ^= 1;
        let mut c = Check::pattern();
        for part in body.chunks(50) {
            c.update(part);
        }
        assert_eq!(c.finish(), Err(130));
    }

    #[test]
    fn digest_is_sha256() {
        let mut c = Check::digest();
        c.update(b"ab");
        c.update(b"c");
        assert_eq!(
            c.finish().unwrap().unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let book = DigestBook::default();
        assert_eq!(book.record("u", "1"), None);
        assert_eq!(book.record("u", "1"), None);
        assert_eq!(book.record("u", "2"), Some("1".into()));
    }

    #[test]
    fn a_body_that_changes_between_fetches_of_a_url_is_a_mismatch() {
        use crate::measure::clock::Clock;
        use crate::transport::{ObjectReq, Progress, Sink};
        let (clock, book) = (Clock::start(), DigestBook::default());
        let req = ObjectReq {
            uri: http::Uri::from_static("https://198.18.0.2/page"),
            expected_len: None,
            verify: true,
        };
        let fetched = |body: &[u8]| {
            let mut p = Progress::start(&clock, &req);
            p.headers(http::StatusCode::OK, &http::HeaderMap::new())
                .unwrap();
            p.data(body).unwrap();
            p.finish(&book)
        };
        assert_eq!(fetched(b"abc").error, None);
        assert_eq!(fetched(b"abc").error, None);
        let e = fetched(b"abd").error.expect("a changed body fails");
        assert_eq!(e.0, qbench_core::ErrorKind::BodyMismatch);
        assert!(
            e.1.contains("differs from an earlier fetch's ba7816bf"),
            "{}",
            e.1
        );
        let seen = book.into_map();
        assert_eq!(
            seen["https://198.18.0.2/page"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
