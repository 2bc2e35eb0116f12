//! The pages of `qbench --html` and `qbench compare --html` as a reader meets them: the
//! report's own numbers in the summary, a chart for each thing the report recorded and a
//! note for what it did not, the verdict in words, and nothing a label holds taken as markup.

use std::time::Duration;

use qbench_core::report::compare::CompareReport;
use qbench_core::report::load::IntervalRecord;
use qbench_core::report::thresholds::ThresholdOutcome;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_core::{ErrorKind, HistogramExport, LatencyHistogram, Protocol, Report};

use super::compare::{self as html_compare, verdict};
use super::run as html_run;
use super::scaling_tests::{round, side};

const MB: u64 = 1_000_000;

/// A report of `n` runs, run `i` taking `1 + i/10` s for its one object.
fn report(n: u32) -> Report {
    side(
        Protocol::H3,
        (0..n)
            .map(|i| round(i, MB, 1.0 + f64::from(i) / 10.0, None))
            .collect(),
    )
}

/// The text of the summary row `key`, cells joined by `|`.
fn row(html: &str, key: &str) -> String {
    let start = html
        .find(&format!("<tr data-key=\"{key}\">"))
        .unwrap_or_else(|| panic!("no row {key}"));
    let tr = &html[start..];
    let tr = &tr[..tr.find("</tr>").expect("closed")];
    tr.split("<td")
        .skip(2)
        .map(|c| {
            let c = &c[c.find('>').expect("a cell") + 1..];
            c.trim_end_matches("</td>").to_string()
        })
        .collect::<Vec<_>>()
        .join("|")
}

fn titles(html: &str) -> Vec<String> {
    html.split("<text x=\"400\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">")
        .skip(1)
        .filter_map(|s| s.split("</text>").next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_summary_holds_the_reports_numbers() {
    let mut r = report(3);
    r.summary.objects_completed = 1234;
    r.runs[1].objects.failed = 5;
    r.runs[2].objects.failed = 2;
    let html = html_run::page(&r).unwrap();
    assert_eq!(row(&html, "completed"), "1234");
    assert_eq!(row(&html, "failed"), "7");
    assert_eq!(row(&html, "runs"), "3 of 3");
    let p99 = r.summary.object_latency.summary.p99_us.unwrap();
    assert_eq!(
        row(&html, "latency_p99"),
        format!("{:.2}", p99 as f64 / 1000.0)
    );
    assert!(html.starts_with("<!doctype html>") && html.ends_with("</body></html>\n"));
    // Self-contained: no script, nothing fetched.
    for fetch in ["<script", " src=", " href=", "<link"] {
        assert!(!html.contains(fetch), "{fetch} in the page");
    }
}

#[test]
fn without_intervals_the_page_says_so_and_draws_each_run() {
    let html = html_run::page(&report(3)).unwrap();
    assert!(html.contains("id=\"no-intervals\""), "{html}");
    let t = titles(&html);
    assert!(
        t.iter()
            .any(|t| t.starts_with("object latency per run, h3")),
        "{t:?}"
    );
    assert!(
        t.iter().any(|t| t.starts_with("object latency CDF")),
        "{t:?}"
    );
    assert!(!t.iter().any(|t| t.contains("per interval")), "{t:?}");
    // One run: a per-run line would be a dot; the note alone says why there is no chart.
    let one = html_run::page(&report(1)).unwrap();
    assert!(!titles(&one).iter().any(|t| t.contains("per run")));
    assert!(!one.contains("each run's latency instead"));
}

/// Four intervals of 500 ms, the third with nothing completed.
fn intervals() -> Vec<IntervalRecord> {
    (0..4u64)
        .map(|i| {
            let mut h = LatencyHistogram::new();
            let completed = if i == 2 { 0 } else { 10 * (i + 1) };
            for k in 0..completed {
                h.record(Duration::from_micros(1000 + 100 * k));
            }
            IntervalRecord {
                start_us: i * 500_000,
                end_us: (i + 1) * 500_000,
                warmup: false,
                completed,
                failed: 0,
                dropped: 0,
                payload_bytes: 0,
                in_flight: 0,
                errors: Default::default(),
                latency: HistogramExport::from(&h),
                ttfb: None,
                start_lag: None,
            }
        })
        .collect()
}

#[test]
fn intervals_are_drawn_over_time_with_gaps_where_nothing_completed() {
    let mut r = report(1);
    r.runs[0].intervals = intervals();
    let html = html_run::page(&r).unwrap();
    assert!(!html.contains("no-intervals"));
    let t = titles(&html);
    assert!(
        t.iter()
            .any(|t| t.starts_with("object latency per interval")),
        "{t:?}"
    );
    assert!(
        t.iter().any(|t| t.starts_with("completed per interval")),
        "{t:?}"
    );
    let lines: Vec<&str> = html
        .split("<polyline")
        .skip(1)
        .filter_map(|s| s.split("points=\"").nth(1)?.split('"').next())
        .collect();
    // p50 and p99 skip the empty interval; the rate keeps it, at zero.
    let counts: Vec<usize> = lines.iter().take(3).map(|p| p.split(' ').count()).collect();
    assert_eq!(counts, [3, 3, 4], "{lines:?}");
}

#[test]
fn hostile_labels_are_text() {
    let mut r = report(1);
    r.environment.warnings = vec!["<script>alert(1)</script>".into()];
    r.runs[0].first_error = Some("timeout: <b>\"x\" & y</b>".into());
    r.summary.errors.add(ErrorKind::Timeout);
    r.command = vec![
        "qbench".into(),
        "--url".into(),
        "https://h/<img src=x>".into(),
    ];
    r.aborted = Some("interrupted <i>".into());
    r.complete = false;
    let html = html_run::page(&r).unwrap();
    for raw in ["<script>", "<b>", "<img", "<i>"] {
        assert!(!html.contains(raw), "{raw} in the page");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("timeout: &lt;b&gt;&quot;x&quot; &amp; y&lt;/b&gt;"));
    assert!(html.contains("id=\"status\" class=\"bad\">Incomplete: interrupted &lt;i&gt;"));
}

#[test]
fn thresholds_show_what_was_seen_and_which_failed() {
    let mut r = report(1);
    assert!(!html_run::page(&r).unwrap().contains("id=\"thresholds\""));
    r.thresholds = vec![
        ThresholdOutcome {
            condition: "p99>50ms".into(),
            metric: "p99".into(),
            op: ">".into(),
            limit: 50_000.0,
            unit: "us".into(),
            observed: Some(61_000.0),
            failed: true,
        },
        ThresholdOutcome {
            condition: "errors>0".into(),
            metric: "errors".into(),
            op: ">".into(),
            limit: 0.0,
            unit: "errors".into(),
            observed: Some(0.0),
            failed: false,
        },
    ];
    let html = html_run::page(&r).unwrap();
    assert!(html.contains("1 of 2 conditions met: the command failed (exit status 3)"));
    assert!(html.contains("<code>p99&gt;50ms</code></td><td>61000 us</td><td>&gt; 50000 us</td><td class=\"w bad\">met: fails the command</td>"), "{html}");
    assert!(html.contains("not met: passes"));
}

/// A goodput comparison over five rounds: B's rounds take `b_secs` where A's take 1 s.
fn comparison(b_secs: f64, test: Test) -> CompareReport {
    let rounds = |secs: f64| {
        (0..5)
            .map(|i| round(i, 100 * MB, secs + f64::from(i) * 0.01, None))
            .collect()
    };
    CompareReport::new(
        5,
        ("h2".into(), "h3".into()),
        vec![],
        (
            side(Protocol::H2, rounds(1.0)),
            side(Protocol::H3, rounds(b_secs)),
        ),
        (Metric::Goodput, test),
    )
}

#[test]
fn the_verdict_names_the_better_side_its_margin_and_its_significance() {
    let html = verdict(&comparison(0.8, Test::Welch));
    assert!(html.contains("data-verdict=\"b_faster\""), "{html}");
    assert!(html.contains("B (h3) is better than A (h2): its goodput is higher, and the difference is significant."), "{html}");
    assert!(html.contains("B (h3) is 2"), "{html}");
    assert!(
        html.contains("% better than A (h2) (higher goodput is better)"),
        "{html}"
    );
    assert!(html.contains("95% interval: B is between "), "{html}");
    assert!(html.contains("below 0.01."), "{html}");
    let worse = verdict(&comparison(1.25, Test::Welch));
    assert!(worse.contains("data-verdict=\"a_faster\""), "{worse}");
    assert!(worse.contains("A (h2) is better than B (h3)"), "{worse}");
    assert!(worse.contains("% worse than A (h2)"), "{worse}");
    let same = verdict(&comparison(1.0, Test::Welch));
    assert!(same.contains("data-verdict=\"inconclusive\""), "{same}");
    assert!(same.contains("Inconclusive: neither side is shown to have the better goodput."));
    assert!(
        same.contains("it includes no difference") || same.contains("Why undecided"),
        "{same}"
    );
}

#[test]
fn the_compare_page_puts_both_sides_side_by_side() {
    let r = comparison(0.8, Test::Welch);
    let html = html_compare::page(&r).unwrap();
    assert!(html.contains("<th>A: h2</th><th>B: h3</th>"), "{html}");
    assert_eq!(
        row(&html, "completed"),
        format!(
            "{}|{}",
            r.a.summary.objects_completed, r.b.summary.objects_completed
        )
    );
    let t = titles(&html);
    for want in [
        "goodput per round, h2 vs h3",
        "object latency per round, h2 vs h3",
        "object latency CDF, h2 vs h3",
    ] {
        assert!(t.iter().any(|t| t == want), "{want} not in {t:?}");
    }
    assert!(html.contains("id=\"no-intervals\""));
    assert!(html.find("id=\"verdict\"") < html.find("id=\"summary\""));
}

/// A side's label is text wherever the compare page puts it: in the summary table's cells and
/// in its SVG charts' titles, `&`, `<`, `>` and `"` come out as entities.
#[test]
fn a_label_with_markup_characters_is_text_in_table_cells_and_charts() {
    let hostile = r#"h2 & <b>"x"</b>"#;
    let escaped = "h2 &amp; &lt;b&gt;&quot;x&quot;&lt;/b&gt;";
    let plain = comparison(0.8, Test::Welch);
    let r = CompareReport::new(
        5,
        (hostile.into(), "h3".into()),
        vec![],
        (plain.a, plain.b),
        (Metric::Goodput, Test::Welch),
    );
    let html = html_compare::page(&r).unwrap();
    assert!(
        html.contains(&format!("<th>A: {escaped}</th><th>B: h3</th>")),
        "{html}"
    );
    let t = titles(&html);
    let want = format!("goodput per round, {escaped} vs h3");
    assert!(t.contains(&want), "{want} not in {t:?}");
    assert!(!html.contains("<b>"), "{html}");
    assert!(
        !html.contains(r#"&lt;b&gt;"x""#),
        "a quote left raw: {html}"
    );
}
