use serde_json::{json, Value};

use super::*;

/// `ms` milliseconds after 2026-11-24 14:00:00 UTC, as Chrome writes it; `ms` < 1 hour.
fn at(ms: u64) -> String {
    let (min, sec, milli) = (ms / 60_000, ms / 1000 % 60, ms % 1000);
    format!("2026-11-24T14:{min:02}:{sec:02}.{milli:03}Z")
}

/// An entry as browsers write it, private fields included.
fn entry(url: &str, start: u64, time: u64, size: u64) -> Value {
    json!({
        "pageref": "page_1", "startedDateTime": at(start), "time": time,
        "request": {"method": "GET", "url": url, "httpVersion": "h2", "headers": []},
        "response": {
            "status": 200, "bodySize": size, "_transferSize": size + 300,
            "content": {"size": size, "mimeType": "text/plain"}
        },
        "cache": {}, "timings": {"send": 0.1, "wait": 20, "receive": 3}, "_priority": "High"
    })
}

/// An entry of https://a.test.
fn on_a(path: &str, start: u64, time: u64, size: u64) -> Value {
    entry(&format!("https://a.test{path}"), start, time, size)
}

fn initiated(mut e: Value, initiator: Value) -> Value {
    e["_initiator"] = initiator;
    e
}

fn parser(url: &str) -> Value {
    json!({"type": "parser", "url": url, "lineNumber": 12})
}

/// `e`, found by the HTML parser in https://a.test's `path`.
fn in_a(path: &str, e: Value) -> Value {
    initiated(e, parser(&format!("https://a.test{path}")))
}

fn har(entries: &[Value]) -> String {
    json!({"log": {
        "version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"},
        "pages": [{"id": "page_1", "title": "t", "pageTimings": {}}], "entries": entries
    }})
    .to_string()
}

fn parse(entries: &[Value]) -> PageProfile {
    PageProfile::from_har(&har(entries)).expect("a profile")
}

fn tree(p: &PageProfile) -> Vec<(u32, Option<usize>)> {
    p.objects.iter().map(|o| (o.level, o.parent)).collect()
}

fn urls(p: &PageProfile) -> Vec<&str> {
    p.objects.iter().map(|o| o.url.as_str()).collect()
}

/// Document → stylesheet → font, and an image beside the stylesheet.
fn page(initiators: bool) -> Vec<Value> {
    let by = |path, e| if initiators { in_a(path, e) } else { e };
    vec![
        on_a("/", 0, 100, 5_000),
        by("/", on_a("/s.css", 120, 50, 2_000)),
        by("/", on_a("/l.png", 125, 300, 30_000)),
        by("/s.css", on_a("/f.woff2", 180, 40, 20_000)),
    ]
}

#[test]
fn initiators_give_three_levels() {
    let p = parse(&page(true));
    let want = [(0, None), (1, Some(0)), (1, Some(0)), (2, Some(1))];
    assert_eq!(tree(&p), want);
    assert_eq!(p.levels(), 3);
    assert_eq!(p.total_bytes(), 57_000);
    assert_eq!(p.origins, ["https://a.test:443"]);
    assert_eq!(p.objects[3].url, "https://a.test/f.woff2");
    assert_eq!(p.objects[3].size, 20_000);
}

#[test]
fn waves_without_initiators_give_the_same_levels() {
    assert_eq!(parse(&page(false)), parse(&page(true)));
}

#[test]
fn an_initiator_wins_over_waves() {
    // By waves the script would hang under the stylesheet, the last to finish before it.
    let mut entries = page(true);
    entries.push(on_a("/s.js", 200, 10, 100));
    assert_eq!(tree(&parse(&entries))[4], (2, Some(1)));
    entries[4] = in_a("/", entries[4].clone());
    assert_eq!(tree(&parse(&entries))[4], (1, Some(0)));
}

#[test]
fn script_initiators_read_the_stack_and_its_parents() {
    let frames = json!([{"functionName": "f", "url": "https://a.test/app.js", "lineNumber": 1}]);
    let later = json!({"callFrames": [], "parent": {"description": "x", "callFrames": frames}});
    let stack = json!({"type": "script", "stack": {"callFrames": frames}});
    let entries = [
        on_a("/", 0, 100, 1),
        in_a("/", on_a("/app.js", 110, 20, 1)),
        on_a("/late.css", 120, 900, 1),
        initiated(on_a("/api", 400, 5, 1), stack),
        initiated(on_a("/api2", 500, 5, 1), json!({"stack": later})),
        // WebPageTest writes the initiator as a plain URL.
        initiated(on_a("/api3", 600, 5, 1), json!("https://a.test/app.js")),
    ];
    let parents: Vec<_> = tree(&parse(&entries)).into_iter().map(|t| t.1).collect();
    assert_eq!(parents, [None, Some(0), Some(0), Some(1), Some(1), Some(1)]);
}

#[test]
fn initiator_lookup_ignores_fragments_and_takes_the_latest_fetch() {
    let entries = [
        on_a("/p#intro", 0, 100, 1),
        on_a("/other", 100, 10, 1),
        on_a("/p", 300, 50, 1),
        in_a("/p#top", on_a("/x", 500, 5, 1)),
    ];
    assert_eq!(tree(&parse(&entries))[3], (3, Some(2)));
}

#[test]
fn unknown_or_later_initiators_fall_back_to_waves() {
    let entries = [
        on_a("/", 0, 100, 1),
        initiated(on_a("/a", 150, 10, 1), parser("https://elsewhere.test/")),
        // Names an entry that starts after it: no such parent yet.
        in_a("/c", on_a("/b", 200, 10, 1)),
        on_a("/c", 300, 10, 1),
    ];
    let want = [(0, None), (1, Some(0)), (2, Some(1)), (3, Some(2))];
    assert_eq!(tree(&parse(&entries)), want);
}

#[test]
fn the_first_entry_is_level_zero_whatever_its_initiator() {
    let entries = [in_a("/", on_a("/", 0, 0, 1)), on_a("/b", 0, 0, 1)];
    // The second finished at the first's start but starts no earlier: not its parent.
    assert_eq!(tree(&parse(&entries)), [(0, None), (1, Some(0))]);
}

#[test]
fn origins_are_normalised_in_first_seen_order() {
    let written = [
        "https://A.test/x",
        "https://a.test:443/y",
        "http://a.test",
        "HTTPS://user:pw@CDN.a.test:8443/z?q=1#f",
        "http://[::1]:8080/",
        "http://[2001:DB8::1]/",
        "https://a.test:/empty-port",
        "http://a.test:80/",
    ];
    let entries: Vec<Value> = written.iter().map(|u| entry(u, 0, 0, 1)).collect();
    let p = parse(&entries);
    let want = [
        "https://a.test:443",
        "http://a.test:80",
        "https://cdn.a.test:8443",
        "http://[::1]:8080",
        "http://[2001:db8::1]:80",
    ];
    assert_eq!(p.origins, want);
    let origins: Vec<usize> = p.objects.iter().map(|o| o.origin).collect();
    assert_eq!(origins, [0, 0, 1, 2, 3, 4, 0, 1]);
    assert_eq!(urls(&p), written);
}

#[test]
fn entries_out_of_order_are_sorted_by_start() {
    let mut img = on_a("/l.png", 0, 300, 30_000);
    // 14:00:00.125Z written with another offset.
    img["startedDateTime"] = json!("2026-11-24T15:00:00.125+01:00");
    let p = parse(&[
        on_a("/f.woff2", 180, 40, 20_000),
        on_a("/tie-1", 700, 0, 1),
        on_a("/", 0, 100, 5_000),
        img,
        on_a("/tie-0", 700, 0, 1),
        on_a("/s.css", 120, 50, 2_000),
    ]);
    let paths: Vec<&str> = urls(&p).iter().map(|u| &u[14..]).collect();
    assert_eq!(
        paths,
        ["/", "/s.css", "/l.png", "/f.woff2", "/tie-1", "/tie-0"]
    );
    // The tie's second hangs under its first, which finished (time 0) as it started.
    let want = [
        (0, None),
        (1, Some(0)),
        (1, Some(0)),
        (2, Some(1)),
        (2, Some(2)),
        (3, Some(4)),
    ];
    assert_eq!(tree(&p), want);
}

#[test]
fn profiles_round_trip_through_json() {
    let p = parse(&page(true));
    let text = serde_json::to_string(&p).unwrap();
    assert_eq!(serde_json::from_str::<PageProfile>(&text).unwrap(), p);
    let schema = serde_json::to_string(&schemars::schema_for!(PageProfile)).unwrap();
    assert!(schema.contains("origins"), "{schema}");
}

fn refused(text: &str) -> String {
    PageProfile::from_har(text).expect_err(text).to_string()
}

#[test]
fn texts_that_are_not_json_or_not_a_har_are_refused() {
    let json = refused("{\n  \"log\": ?\n}");
    assert_eq!(json, "not valid JSON (line 2, column 10): expected value");
    let json = refused(r#"{"log": {}} x"#);
    assert_eq!(
        json,
        "not valid JSON (line 1, column 13): trailing characters"
    );
    let cut = refused(r#"{"log": {"entries": ["#);
    assert_eq!(
        cut,
        "truncated JSON (line 1, column 21): the text ends inside a value"
    );
    assert_eq!(refused(" \n"), "not a HAR file: the text is empty");
    for text in ["[]", "7", r#"{"log": []}"#, r#"{"entries": []}"#] {
        assert_eq!(refused(text), r#"not a HAR file: no "log" object"#);
    }
    for text in [r#"{"log": {}}"#, r#"{"log": {"entries": {}}}"#] {
        assert_eq!(refused(text), r#"not a HAR file: no "log.entries" array"#);
    }
    let none = refused(r#"{"log": {"entries": []}}"#);
    assert_eq!(none, "the HAR has no entries (log.entries is empty)");
    let bom = format!("\u{feff}{}", har(&page(false)));
    assert_eq!(PageProfile::from_har(&bom).unwrap(), parse(&page(false)));
}

#[test]
fn more_than_the_most_entries_are_refused_before_reading_any() {
    let text = |n: usize| format!(r#"{{"log": {{"entries": [{}]}}}}"#, vec!["{}"; n].join(","));
    let too_many = PageProfile::from_har(&text(MAX_ENTRIES + 1)).unwrap_err();
    assert_eq!(too_many, HarError::TooManyEntries(MAX_ENTRIES + 1));
    let want = "the HAR has 100001 entries; at most 100000 are read";
    assert_eq!(too_many.to_string(), want);
    let at_most = PageProfile::from_har(&text(MAX_ENTRIES)).unwrap_err();
    let want = "entry 0: request.url is missing or not a string";
    assert_eq!(at_most.to_string(), want);
}

/// A good document first, then `bad`, starting before it so that a sorted index would show.
fn second_entry_error(bad: Value) -> String {
    let entries = [on_a("/", 50, 10, 1), bad];
    PageProfile::from_har(&har(&entries))
        .expect_err("an error")
        .to_string()
}

/// `e` with the field at `pointer` set to the JSON `v`, or removed when `v` is empty.
fn set(mut e: Value, pointer: &str, v: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let parent = e.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    parent.remove(key);
    if !v.is_empty() {
        parent.insert(key.into(), serde_json::from_str(v).unwrap());
    }
    e
}

fn with(pointer: &str, v: &str) -> Value {
    set(entry("https://a.test/x", 0, 1, 1), pointer, v)
}

/// The message for a bad second entry with URL https://a.test/x, after its name.
fn problem(bad: Value) -> String {
    let message = second_entry_error(bad);
    let problem = message.strip_prefix("entry 1 (https://a.test/x): ");
    problem.unwrap_or_else(|| panic!("{message}")).to_string()
}

fn url_error(url: &str) -> String {
    second_entry_error(with("/request/url", &json!(url).to_string()))
}

#[test]
fn bad_urls_name_the_entry() {
    let missing = "entry 1: request.url is missing or not a string";
    assert_eq!(second_entry_error(with("/request", "")), missing);
    assert_eq!(second_entry_error(with("/request/url", "7")), missing);
    let not_an_object = second_entry_error(json!("https://a.test/"));
    assert_eq!(not_an_object, "entry 1: not a JSON object");
    let port = "the port is not a number from 0 to 65535";
    let cases = [
        ("", "it is empty"),
        ("/relative.css", "it has no scheme"),
        ("https:a.test", "no \"//\" after the scheme"),
        ("https:///x", "the host is empty"),
        ("https://a.test:99999/", port),
        ("https://a.test:+80/", port),
        (
            "https://a%41.test/",
            "the host has a character hosts cannot have",
        ),
        ("http://[::1/", "the IPv6 address has no closing \"]\""),
        ("http://[zz]/", "the IPv6 address is malformed"),
    ];
    for (url, why) in cases {
        let want = format!("entry 1 ({url}): the URL does not parse: {why}");
        assert_eq!(url_error(url), want);
    }
    let schemes = [
        ("data:image/png;base64,iVBO", "data"),
        ("blob:https://a.test/0b5e", "blob"),
        ("WS://a.test/live", "ws"),
        ("chrome-extension://abc/x.js", "chrome-extension"),
    ];
    for (url, scheme) in schemes {
        let want = format!("entry 1 ({url}): scheme \"{scheme}\" is not http or https");
        assert_eq!(url_error(url), want);
    }
    // Messages stay one line and short, whatever the URL holds.
    let space = "the URL does not parse: it has whitespace or a control character";
    let want = format!("entry 1 (https://a.test/\\nb): {space}");
    assert_eq!(url_error("https://a.test/\nb"), want);
    let long = format!("https://a.test/ {}", "x".repeat(500));
    let want = format!("entry 1 ({}…): {space}", &long[..SHOWN_CHARS]);
    assert_eq!(url_error(&long), want);
}

/// An entry whose content.size and bodySize are the JSON given, or absent when empty.
fn sized(content: &str, body: &str) -> Value {
    set(
        with("/response/content/size", content),
        "/response/bodySize",
        body,
    )
}

#[test]
fn bad_sizes_name_the_entry() {
    let missing = "response size is missing (no response.content.size or response.bodySize)";
    let cases = [
        ("", "", missing),
        ("null", "null", missing),
        ("-1", "-1", "response size is negative (-1)"),
        ("", "-1", "response size is negative (-1)"),
        ("-2", "", "response size is negative (-2)"),
        (
            "",
            "1e30",
            "response size 1e+30 is above the 10 GB a qbench server sends as one object",
        ),
    ];
    for (content, body, want) in cases {
        assert_eq!(problem(sized(content, body)), want, "{content} {body}");
    }
    let big = "response size 1099511627777 is above the 10 GB a qbench server sends as one object";
    assert_eq!(problem(sized("1099511627777", "")), big);
    let whole = |field: &str, v: &str| format!("{field} is not a whole number of bytes ({v})");
    let content = "response.content.size";
    assert_eq!(problem(sized("1.5", "3")), whole(content, "1.5"));
    assert_eq!(problem(sized("[]", "3")), whole(content, "[]"));
    let twelve = r#""12""#;
    assert_eq!(
        problem(sized("3", twelve)),
        whole("response.bodySize", twelve)
    );
    let good = [
        ("-1", "300", 300),
        ("400", "-1", 400),
        ("400", "120", 400),
        ("null", "120", 120),
        ("12.0", "", 12),
        ("10000000000", "", MAX_OBJECT_SIZE),
    ];
    for (content, body, want) in good {
        assert_eq!(parse(&[sized(content, body)]).objects[0].size, want);
    }
}

#[test]
fn bad_start_and_time_name_the_entry() {
    let start = "/startedDateTime";
    let not_rfc = "startedDateTime is not an RFC 3339 date-time";
    assert_eq!(problem(with(start, "")), "startedDateTime is missing");
    let dates = [
        (r#""yesterday""#, "the 'year' component could not be parsed"),
        (r#""2026-13-01T00:00:00Z""#, "month was not in range"),
        (
            r#""2026-11-24T14:00:00+0100""#,
            "a character literal was not valid",
        ),
        ("1764000000", "not a string"),
    ];
    for (v, why) in dates {
        assert_eq!(problem(with(start, v)), format!("{not_rfc} ({v}): {why}"));
    }
    let times = [
        ("", "time is missing"),
        ("null", "time is missing"),
        ("-1", "time is negative (-1)"),
        ("-0.5", "time is negative (-0.5)"),
        (r#""12""#, r#"time is not a number ("12")"#),
    ];
    for (v, want) in times {
        assert_eq!(problem(with("/time", v)), want);
    }
    // RFC 3339 allows a space for the "T"; HAR times may be fractional.
    for (field, v) in [
        (start, r#""2026-11-24 06:00:00.1234-08:00""#),
        ("/time", "0.25"),
    ] {
        assert_eq!(parse(&[with(field, v)]).objects.len(), 1);
    }
}

mod props;
