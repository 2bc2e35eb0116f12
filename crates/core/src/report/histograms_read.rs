//! A report's histograms checked as it is read: each `hdr` field anywhere in the document
//! must decode, so that a corrupt one is refused with its field named when the file is read,
//! not later by whichever command draws it first (and not at all by one that never does).

use serde_json::Value;

use crate::histogram::LatencyHistogram;

/// The path (`runs[0].ttfb.hdr`) of the first histogram in `doc` that does not decode, and
/// why.
pub fn first_corrupt(doc: &Value) -> Option<(String, String)> {
    fn walk(v: &Value, path: &str) -> Option<(String, String)> {
        match v {
            Value::Object(m) => m.iter().find_map(|(k, v)| {
                let here = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match v {
                    Value::String(s) if k == "hdr" => LatencyHistogram::decode(s)
                        .err()
                        .map(|e| (here, e.to_string())),
                    _ => walk(v, &here),
                }
            }),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .find_map(|(i, v)| walk(v, &format!("{path}[{i}]"))),
            _ => None,
        }
    }
    walk(doc, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_histogram_is_named_by_its_path() {
        let mut h = LatencyHistogram::new();
        h.record(std::time::Duration::from_micros(1500));
        let good = h.encode();
        let doc = serde_json::json!({
            "summary": {"ttfb": {"hdr": good}},
            "runs": [{"ttfb": {"hdr": good}}, {"object_latency": {"hdr": "not base64!"}}],
        });
        let (path, why) = first_corrupt(&doc).unwrap();
        assert_eq!(path, "runs[1].object_latency.hdr");
        assert!(why.contains("base64"), "{why}");
        let truncated = serde_json::json!({"hdr": &good[..good.len() / 2]});
        assert_eq!(first_corrupt(&truncated).unwrap().0, "hdr");
        assert!(first_corrupt(&serde_json::json!({"runs": [{"hdr": good}]})).is_none());
    }
}
