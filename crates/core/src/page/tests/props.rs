//! Property tests of the HAR parser: any input gives a profile or an error, and every
//! profile keeps its invariants.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

const ORIGINS: [&str; 5] = [
    "https://a.test",
    "https://A.test:443",
    "http://a.test",
    "https://cdn.test:8443",
    "http://[::1]:8080",
];
const PATHS: [&str; 5] = ["/", "/a.css", "/b.js", "/c.png#x", "/d?q=1"];

fn good_url() -> impl Strategy<Value = String> {
    let parts = (
        prop::sample::select(&ORIGINS[..]),
        prop::sample::select(&PATHS[..]),
    );
    parts.prop_map(|(o, p)| format!("{o}{p}"))
}

fn any_url() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => good_url(),
        1 => Just("data:text/plain,hi".to_string()),
        1 => Just("blob:https://a.test/1".to_string()),
        1 => Just("ws://a.test/".to_string()),
        1 => Just("chrome-extension://abc/x.js".to_string()),
        1 => ".{0,16}",
    ]
}

/// Any JSON text, or "" for absence.
fn junk() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("null".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        (-5i64..5000).prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| json!(f).to_string()),
        ".{0,8}".prop_map(|s| json!(s).to_string()),
        Just(r#"{"nested": [1, 2]}"#.to_string()),
    ]
}

fn initiator(url: Option<String>, kind: u8) -> String {
    let Some(url) = url else {
        return String::new();
    };
    let frames = json!([{"url": url}]);
    let init = match kind % 4 {
        0 => parser(&url),
        1 => json!({"type": "script", "stack": {"callFrames": frames}}),
        2 => json!({"stack": {"callFrames": [], "parent": {"callFrames": frames}}}),
        _ => json!(url),
    };
    init.to_string()
}

/// Entries that may be wrong anywhere.
fn junk_entry() -> impl Strategy<Value = Value> {
    let start =
        prop_oneof![3 => (0u64..5_000).prop_map(|ms| json!(at(ms)).to_string()), 1 => junk()];
    let time = prop_oneof![3 => (0.0f64..500.0).prop_map(|t| t.to_string()), 1 => junk()];
    let init = (proptest::option::of(any_url()), any::<u8>());
    let parts = (any_url(), junk(), junk(), start, time, init);
    parts.prop_map(|(url, content, body, start, time, (i, k))| {
        let e = json!({"request": {"url": url}, "response": {"content": {}}});
        let e = set(e, "/response/content/size", &content);
        let e = set(e, "/response/bodySize", &body);
        let e = set(e, "/startedDateTime", &start);
        set(set(e, "/time", &time), "/_initiator", &initiator(i, k))
    })
}

/// A valid entry and its size.
fn good_entry() -> impl Strategy<Value = (Value, u64)> {
    let init = (proptest::option::of(good_url()), any::<u8>());
    let parts = (
        good_url(),
        0u64..5_000,
        0u64..500,
        0u64..1_000_000,
        0u8..3,
        init,
    );
    parts.prop_map(|(url, start, time, size, shape, (i, k))| {
        let e = entry(&url, start, time, size);
        let e = match shape {
            0 => set(e, "/response/bodySize", "-1"),
            1 => set(e, "/response/content/size", "-1"),
            _ => set(e, "/response/content/size", ""),
        };
        (set(e, "/_initiator", &initiator(i, k)), size)
    })
}

fn check_invariants(p: &PageProfile, entries: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(p.objects.len(), entries);
    prop_assert_eq!((p.objects[0].level, p.objects[0].parent), (0, None));
    let mut seen = 0;
    for (i, o) in p.objects.iter().enumerate() {
        prop_assert!(o.origin < p.origins.len());
        // Origins are numbered as first seen.
        prop_assert!(o.origin <= seen);
        seen += usize::from(o.origin == seen);
        match o.parent {
            Some(parent) => {
                prop_assert!(parent < i);
                prop_assert_eq!(o.level, p.objects[parent].level + 1);
            }
            None => prop_assert_eq!(o.level, 0),
        }
    }
    prop_assert_eq!(seen, p.origins.len());
    let sum: u64 = p.objects.iter().map(|o| o.size).sum();
    prop_assert_eq!(p.total_bytes(), sum);
    let top = p.objects.iter().map(|o| o.level).max().unwrap();
    prop_assert_eq!(p.levels(), top + 1);
    Ok(())
}

/// Valid entries with distinct starts, in start order.
fn distinct_starts() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec((good_entry(), 1u64..50), 1..30).prop_map(|v| {
        let mut start = 0;
        let mut restart = |(e, _), gap| {
            start += gap;
            set(e, "/startedDateTime", &json!(at(start)).to_string())
        };
        v.into_iter().map(|(e, gap)| restart(e, gap)).collect()
    })
}

proptest! {
    #[test]
    fn any_text_is_a_profile_or_an_error(text in any::<String>()) {
        let _ = PageProfile::from_har(&text);
    }

    #[test]
    fn truncated_hars_are_refused(
        entries in prop::collection::vec(good_entry(), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let entries: Vec<Value> = entries.into_iter().map(|(e, _)| e).collect();
        let text = har(&entries);
        let mut end = cut.index(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        prop_assert!(PageProfile::from_har(&text[..end]).is_err());
    }

    #[test]
    fn har_like_junk_never_panics(entries in prop::collection::vec(junk_entry(), 1..12)) {
        if let Ok(p) = PageProfile::from_har(&har(&entries)) {
            check_invariants(&p, entries.len())?;
        }
    }

    #[test]
    fn valid_hars_keep_the_invariants(entries in prop::collection::vec(good_entry(), 1..40)) {
        let sizes: u64 = entries.iter().map(|(_, s)| s).sum();
        let entries: Vec<Value> = entries.into_iter().map(|(e, _)| e).collect();
        let p = PageProfile::from_har(&har(&entries));
        let p = p.map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_invariants(&p, entries.len())?;
        prop_assert_eq!(p.total_bytes(), sizes);
    }

    #[test]
    fn file_order_does_not_matter_when_starts_differ(
        (entries, shuffled) in distinct_starts()
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
    ) {
        prop_assert_eq!(parse(&shuffled), parse(&entries));
    }
}
