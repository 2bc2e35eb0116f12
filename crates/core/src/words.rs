//! Command lines with `{name}` placeholders (`--client exec:`, `--server exec:`): split like
//! a POSIX shell would (no shell ever runs them), each word text and placeholders. `{{` is a
//! `{` and `}}` a `}` of the text, as in Rust's and Python's format strings; a lone `}` is
//! text.

/// One part of a word: text, or a placeholder by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(String),
    Slot(&'static str),
}

/// Why a word is not text and known placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WordError {
    /// A placeholder not in the list.
    Unknown(String),
    /// A `{` without its `}`: the word.
    Unclosed(String),
}

/// `word`'s text and placeholders, each placeholder one of `known`'s names.
pub(crate) fn pieces(word: &str, known: &[(&'static str, &str)]) -> Result<Vec<Piece>, WordError> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = word;
    while let Some(at) = rest.find(['{', '}']) {
        text.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if rest[at..].starts_with('}') {
            text.push('}');
            rest = after.strip_prefix('}').unwrap_or(after);
            continue;
        }
        if let Some(more) = after.strip_prefix('{') {
            text.push('{');
            rest = more;
            continue;
        }
        let close = after
            .find('}')
            .ok_or_else(|| WordError::Unclosed(word.to_string()))?;
        let name = &after[..close];
        let slot = known
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| WordError::Unknown(name.to_string()))?;
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
        out.push(Piece::Slot(slot.0));
        rest = &after[close + 1..];
    }
    text.push_str(rest);
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// The words of `source`, or `None` for unbalanced quotes.
pub(crate) fn split(source: &str) -> Option<Vec<String>> {
    shlex::split(source)
}

/// `word` with each placeholder replaced by `value(name)`; a word that does not parse
/// (checked before) comes out empty.
pub(crate) fn fill(
    word: &str,
    known: &[(&'static str, &str)],
    value: impl Fn(&'static str) -> String,
) -> String {
    let mut s = String::new();
    for piece in pieces(word, known).unwrap_or_default() {
        match piece {
            Piece::Text(t) => s.push_str(&t),
            Piece::Slot(name) => s.push_str(&value(name)),
        }
    }
    s
}
