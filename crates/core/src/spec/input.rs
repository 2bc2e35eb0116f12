//! Every file qbench reads has a size limit, enforced while reading: a file's stated size
//! says nothing about a pipe, a FIFO or `/dev/zero`, which would otherwise be read until
//! memory runs out. The limits, each far above what qbench itself writes:

use std::io::Read;

/// A report or cell file (`merge`, `hgrm`, `report`, `cost --measured`, a sweep's cells).
pub const MAX_REPORT_BYTES: u64 = 256 << 20;
/// A HAR file (`--page`, a scenario's `page`).
pub const MAX_HAR_BYTES: u64 = 256 << 20;
/// A scenario file.
pub const MAX_SCENARIO_BYTES: u64 = 4 << 20;
/// A certificate, key or CA bundle in PEM.
pub const MAX_PEM_BYTES: u64 = 4 << 20;
/// A rate trace (`rate=trace:FILE`).
pub const MAX_TRACE_BYTES: u64 = 64 << 20;
/// Criterion's estimates of one bench (`cost`).
pub const MAX_ESTIMATES_BYTES: u64 = 16 << 20;

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("more than {cap} bytes, the limit for {what}")]
    TooLarge { cap: u64, what: &'static str },
    #[error("not UTF-8 text")]
    NotText,
    // The inner error speaks for itself: `{:#}` would print it twice.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads all of `r`, failing as soon as it holds more than `cap` bytes.
pub fn read_capped(r: impl Read, cap: u64, what: &'static str) -> Result<Vec<u8>, InputError> {
    let mut out = Vec::new();
    r.take(cap.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(InputError::TooLarge { cap, what });
    }
    Ok(out)
}

/// `read_capped` for text.
pub fn read_text_capped(r: impl Read, cap: u64, what: &'static str) -> Result<String, InputError> {
    String::from_utf8(read_capped(r, cap, what)?).map_err(|_| InputError::NotText)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_endless_input_stops_at_the_cap() {
        let zeros = std::io::repeat(0);
        let e = read_capped(zeros, 1000, "a test").unwrap_err();
        assert_eq!(e.to_string(), "more than 1000 bytes, the limit for a test");
        assert_eq!(read_capped(&b"abc"[..], 3, "x").unwrap(), b"abc");
        assert!(matches!(
            read_text_capped(&[0xff, 0xfe][..], 10, "x"),
            Err(InputError::NotText)
        ));
    }

    proptest! {
        /// Any bytes and any cap: the bytes themselves, or an error, never a panic.
        #[test]
        fn any_input_is_read_whole_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..300), cap in 0u64..400) {
            match read_capped(&bytes[..], cap, "x") {
                Ok(v) => prop_assert!(v == bytes && v.len() as u64 <= cap),
                Err(InputError::TooLarge { .. }) => prop_assert!(bytes.len() as u64 > cap),
                Err(e) => prop_assert!(false, "{e}"),
            }
        }
    }
}
