//! Latency histograms: HdrHistogram in microseconds, 3 significant digits, exported with a
//! percentile summary and the standard compressed V2 encoding (base64), which existing
//! HdrHistogram tools decode and which merges losslessly across runs and hosts.

use std::time::Duration;

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub const SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("histogram encoding is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram encoding is not a valid V2 histogram: {0}")]
    Decode(String),
    #[error("histograms cannot be merged: {0}")]
    Merge(String),
}

/// A latency histogram in microseconds.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    inner: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        let mut inner = Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid");
        inner.auto(true);
        Self { inner }
    }

    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.inner
            .record(us)
            .expect("auto-resizing histogram accepts every u64");
    }

    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    pub(crate) fn inner(&self) -> &Histogram<u64> {
        &self.inner
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn merge(&mut self, other: &Self) -> Result<(), HistogramError> {
        self.inner
            .add(&other.inner)
            .map_err(|e| HistogramError::Merge(format!("{e:?}")))
    }

    /// How many values are at most `us` (within the histogram's 3 significant digits).
    pub fn count_at_or_below(&self, us: u64) -> u64 {
        if self.is_empty() {
            return 0;
        }
        self.inner.count_between(0, us)
    }

    /// The sum of all values, in microseconds (each counted at its bucket's middle).
    pub fn sum_us(&self) -> f64 {
        self.inner.mean() * self.inner.len() as f64
    }

    /// Value at quantile `q` (0..=1), in microseconds; `None` when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        (!self.is_empty()).then(|| self.inner.value_at_quantile(q))
    }

    /// (value in microseconds, cumulative fraction) at `steps` evenly spaced quantiles, for CDFs.
    pub fn cdf(&self, steps: usize) -> Vec<(u64, f64)> {
        if self.is_empty() || steps == 0 {
            return Vec::new();
        }
        (0..=steps)
            .map(|i| {
                let q = i as f64 / steps as f64;
                (self.inner.value_at_quantile(q), q)
            })
            .collect()
    }

    pub fn summary(&self) -> PercentileSummary {
        let q = |q| self.quantile_us(q);
        let non_empty = !self.is_empty();
        PercentileSummary {
            count: self.len(),
            min_us: non_empty.then(|| self.inner.min()),
            mean_us: non_empty.then(|| self.inner.mean()),
            stdev_us: non_empty.then(|| self.inner.stdev()),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: non_empty.then(|| self.inner.max()),
        }
    }

    /// Compressed V2 encoding (`HISTFAAA...`), base64.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.inner, &mut buf)
            .expect("serializing to a Vec cannot fail");
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    /// Decodes a V2 histogram (compressed or not) of at most 3 significant digits, as qbench
    /// writes them; its header is checked before anything is allocated, so a small encoding
    /// cannot claim a payload or a counts array of hundreds of megabytes.
    pub fn decode(encoded: &str) -> Result<Self, HistogramError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded.trim())?;
        check_header(&bytes)?;
        let mut inner: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| HistogramError::Decode(format!("{e:?}")))?;
        inner.auto(true);
        Ok(Self { inner })
    }
}

// The word-size bits (0x10) are part of the cookie, as hdrhistogram writes it.
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// A V2 payload holds at most one varint (9 bytes at most) per count; at 3 significant digits
/// over the whole u64 range that is 56,320 counts, about 500 KB.
const MAX_PAYLOAD: u32 = 1 << 20;

/// The V2 header fields that decide what decoding allocates, checked against what qbench
/// writes: 3 significant digits at most, and a payload no larger than such counts can need.
fn check_header(bytes: &[u8]) -> Result<(), HistogramError> {
    use std::io::Read;
    let bad = |m: &str| HistogramError::Decode(m.to_string());
    let cookie = bytes.get(..4).ok_or_else(|| bad("too short"))?;
    let mut header = [0u8; 20];
    match u32::from_be_bytes(cookie.try_into().expect("4 bytes")) {
        V2_COOKIE => {
            let h = bytes.get(4..24).ok_or_else(|| bad("too short"))?;
            header.copy_from_slice(h);
        }
        V2_COMPRESSED_COOKIE => {
            let rest = bytes.get(8..).ok_or_else(|| bad("too short"))?;
            let mut inner = [0u8; 24];
            flate2::read::ZlibDecoder::new(rest)
                .read_exact(&mut inner)
                .map_err(|e| bad(&format!("inflating its header: {e}")))?;
            if u32::from_be_bytes(inner[..4].try_into().expect("4 bytes")) != V2_COOKIE {
                return Err(bad("no V2 histogram inside"));
            }
            header.copy_from_slice(&inner[4..]);
        }
        _ => return Err(bad("not a V2 histogram (cookie)")),
    }
    let field = |at: usize| u32::from_be_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let (payload, digits) = (field(0), field(8));
    if digits > u32::from(SIGNIFICANT_DIGITS) {
        return Err(bad(&format!(
            "{digits} significant digits: qbench's histograms have {SIGNIFICANT_DIGITS}"
        )));
    }
    if payload > MAX_PAYLOAD {
        return Err(bad(&format!(
            "a payload of {payload} bytes, more than such a histogram can have ({MAX_PAYLOAD})"
        )));
    }
    Ok(())
}

/// Percentiles in microseconds; every field is `null` for an empty histogram (never NaN).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PercentileSummary {
    pub count: u64,
    pub min_us: Option<u64>,
    pub mean_us: Option<f64>,
    pub stdev_us: Option<f64>,
    pub p50_us: Option<u64>,
    pub p90_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub p999_us: Option<u64>,
    pub max_us: Option<u64>,
}

/// What a histogram looks like in the JSON report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistogramExport {
    pub unit: String,
    #[serde(flatten)]
    pub summary: PercentileSummary,
    /// Standard HdrHistogram V2 compressed encoding, base64.
    pub hdr: String,
}

impl From<&LatencyHistogram> for HistogramExport {
    fn from(h: &LatencyHistogram) -> Self {
        Self {
            unit: "us".into(),
            summary: h.summary(),
            hdr: h.encode(),
        }
    }
}

impl HistogramExport {
    pub fn histogram(&self) -> Result<LatencyHistogram, HistogramError> {
        LatencyHistogram::decode(&self.hdr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_summary_has_nulls_not_nan() {
        let h = LatencyHistogram::new();
        let json = serde_json::to_string(&HistogramExport::from(&h)).unwrap();
        assert!(json.contains("\"p50_us\":null"), "{json}");
        assert!(!json.contains("NaN"));
    }

    #[test]
    fn cdf_is_monotonic() {
        let mut h = LatencyHistogram::new();
        for us in [100u64, 200, 300, 400] {
            h.record(Duration::from_micros(us));
        }
        let c = h.cdf(4);
        assert_eq!(c.len(), 5);
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert_eq!(c.last().unwrap().1, 1.0);
        assert!(LatencyHistogram::new().cdf(10).is_empty());
    }

    #[test]
    fn percentiles_within_three_digits() {
        let mut h = LatencyHistogram::new();
        for us in 1..=10_000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        let p50 = s.p50_us.unwrap() as f64;
        assert!((p50 - 5000.0).abs() / 5000.0 < 0.001, "{p50}");
        assert!(HistogramExport::from(&h).hdr.starts_with("HISTFAAA"));
    }

    /// A V2 header (uncompressed) with these fields and `payload` bytes of zero counts.
    fn v2(payload_len: u32, digits: u32, high: u64, payload: usize) -> String {
        let mut b = Vec::new();
        b.extend(V2_COOKIE.to_be_bytes());
        b.extend(payload_len.to_be_bytes());
        b.extend(0u32.to_be_bytes());
        b.extend(digits.to_be_bytes());
        b.extend(1u64.to_be_bytes());
        b.extend(high.to_be_bytes());
        b.extend(1.0f64.to_be_bytes());
        b.extend(std::iter::repeat_n(0u8, payload));
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    /// A few bytes cannot make decoding allocate hundreds of megabytes: the payload length
    /// and the precision are checked before anything is allocated.
    #[test]
    fn a_header_claiming_too_much_is_refused() {
        let e = LatencyHistogram::decode(&v2(400_000_000, 3, 1 << 40, 0)).unwrap_err();
        assert!(e.to_string().contains("payload of 400000000 bytes"), "{e}");
        let e = LatencyHistogram::decode(&v2(0, 5, u64::MAX / 4, 0)).unwrap_err();
        assert!(e.to_string().contains("5 significant digits"), "{e}");
        let h = LatencyHistogram::decode(&v2(2, 3, 1 << 40, 2)).unwrap();
        assert!(h.is_empty());
        // Compressed: the same check on the inflated header.
        let mut real = LatencyHistogram::new();
        real.record(Duration::from_micros(5));
        assert_eq!(LatencyHistogram::decode(&real.encode()).unwrap().len(), 1);
        for short in ["", "HISTFAAA", "AAAA"] {
            assert!(LatencyHistogram::decode(short).is_err(), "{short}");
        }
    }

    proptest! {
        /// Any bytes, base64-encoded: a histogram or an error, never a panic.
        #[test]
        fn any_encoding_is_a_histogram_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..200), digits in 0u32..8, len in 0u32..2_000_000) {
            let _ = LatencyHistogram::decode(&base64::engine::general_purpose::STANDARD.encode(&bytes));
            let _ = LatencyHistogram::decode(&v2(len, digits, 1 << 30, bytes.len()));
        }

        #[test]
        fn encoding_round_trips_and_merge_adds(
            a in proptest::collection::vec(0u64..10_000_000, 0..200),
            b in proptest::collection::vec(0u64..10_000_000, 0..200),
        ) {
            let mut ha = LatencyHistogram::new();
            a.iter().for_each(|&v| ha.record(Duration::from_micros(v)));
            let mut hb = LatencyHistogram::new();
            b.iter().for_each(|&v| hb.record(Duration::from_micros(v)));

            let decoded = LatencyHistogram::decode(&ha.encode()).unwrap();
            prop_assert!(decoded == ha);

            let mut merged = decoded;
            merged.merge(&LatencyHistogram::decode(&hb.encode()).unwrap()).unwrap();
            prop_assert_eq!(merged.len(), (a.len() + b.len()) as u64);
            let all_max = a.iter().chain(b.iter()).max().copied();
            if let Some(m) = all_max {
                let got = merged.summary().max_us.unwrap();
                prop_assert!(got >= m && (got - m) as f64 <= m as f64 * 0.001 + 1.0);
            }
        }
    }
}
