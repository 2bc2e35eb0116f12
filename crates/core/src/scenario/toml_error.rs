//! A scenario file's TOML error as its reader needs it: the line and column, what is wrong,
//! the nearest valid name when a field or value is unknown, and the line itself with a caret
//! under the word.

/// Most characters of the offending line shown.
const MAX_EXCERPT: usize = 200;

#[derive(Debug, thiserror::Error)]
#[error("line {line}, column {column}: {message}{hint}{excerpt}")]
pub struct TomlError {
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// `; did you mean ...?`, or empty.
    hint: String,
    /// The line and its caret, each on a line of its own, or empty.
    excerpt: String,
}

impl TomlError {
    pub fn new(e: &toml::de::Error, text: &str) -> Self {
        let message = e.message().trim().replace('\n', " ");
        let hint = nearest(&message).map_or(String::new(), |s| format!("; did you mean `{s}`?"));
        let Some(span) = e.span().filter(|s| s.start <= text.len()) else {
            return Self {
                line: 1,
                column: 1,
                message,
                hint,
                excerpt: String::new(),
            };
        };
        // Spans are byte offsets; a slice must start on a character.
        let start = (0..=span.start)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = text[..start].matches('\n').count() + 1;
        let src: String = text[line_start..line_end]
            .trim_end_matches('\r')
            .chars()
            .take(MAX_EXCERPT)
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let column = text[line_start..start].chars().count() + 1;
        let width = text[start..span.end.clamp(start, line_end)]
            .chars()
            .count()
            .max(1);
        let pad = (column - 1).min(MAX_EXCERPT);
        let gutter = " ".repeat(line.to_string().len());
        let caret = "^".repeat(width.min(MAX_EXCERPT.saturating_sub(pad)).max(1));
        Self {
            line,
            column,
            message,
            hint,
            excerpt: format!(
                "\n{gutter} |\n{line} | {src}\n{gutter} | {}{caret}",
                " ".repeat(pad)
            ),
        }
    }
}

/// The valid name nearest to the unknown one in serde's "unknown field `x`, expected one of
/// `a`, `b`" (or "unknown variant"), when it is near enough to be a typo.
fn nearest(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("unknown variant `"))?;
    let (unknown, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected")?.1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|c| (strsim::damerau_levenshtein(unknown, c), c))
        .filter(|(d, c)| *d > 0 && *d <= (c.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct S {
        rounds: Option<u32>,
        kind: Option<K>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum K {
        Compare,
        Compete,
    }

    fn err(text: &str) -> String {
        let e = toml::from_str::<S>(text).unwrap_err();
        TomlError::new(&e, text).to_string()
    }

    #[test]
    fn an_unknown_field_keeps_its_line_a_caret_and_the_nearest_name() {
        let e = err("rounds = 1\nround = 5\n");
        let lines: Vec<&str> = e.lines().collect();
        assert!(
            lines[0].starts_with("line 2, column 1: unknown field `round`"),
            "{e}"
        );
        assert!(lines[0].ends_with("did you mean `rounds`?"), "{e}");
        assert_eq!(&lines[1..], [r"  |", "2 | round = 5", "  | ^^^^^"], "{e}");
    }

    #[test]
    fn an_unknown_value_suggests_too_and_a_far_one_does_not() {
        let e = err("kind = \"compair\"\n");
        assert!(
            e.lines()
                .next()
                .unwrap()
                .contains("did you mean `compare`?"),
            "{e}"
        );
        assert!(e.contains("1 | kind = \"compair\""), "{e}");
        let e = err("zzzzzzzz = 1\n");
        assert!(!e.contains("did you mean"), "{e}");
        // A caret under the value, not the line's start.
        let e = err("rounds = \"x\"\n");
        assert!(e.ends_with("  |          ^^^"), "{e}");
    }

    proptest! {
        /// Any text, any error: a message, never a panic.
        #[test]
        fn any_text_gives_a_message(s in "\\PC{0,80}(\n\\PC{0,40}){0,3}") {
            if let Err(e) = toml::from_str::<S>(&s) {
                let t = TomlError::new(&e, &s).to_string();
                prop_assert!(t.starts_with("line "));
            }
        }
    }
}
