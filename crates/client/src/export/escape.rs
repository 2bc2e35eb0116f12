//! The one escaper for text that qbench puts into its HTML pages and SVG charts: a label, a
//! title or a command line from a report reads as text, never as markup, whether it lands in
//! an element or in a double-quoted attribute.

/// `s` with `&`, `<`, `>` and `"` written as entities. `&` goes first, so that the entities
/// the other three become are not escaped again.
pub(super) fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::html;

    #[test]
    fn the_four_characters_become_entities_once() {
        assert_eq!(
            html(r#"a & <b>"c"</b>"#),
            "a &amp; &lt;b&gt;&quot;c&quot;&lt;/b&gt;"
        );
        assert_eq!(html("&lt; is written"), "&amp;lt; is written");
        assert_eq!(html("n=10x50KB, rtt=50ms 'ok'"), "n=10x50KB, rtt=50ms 'ok'");
    }
}
