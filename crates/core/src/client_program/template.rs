//! `--client 'exec:TEMPLATE'`: a command line with placeholders, split like a POSIX shell
//! would (no shell runs it), checked whole before the first run.

use std::fmt;

use crate::words::{Piece, WordError};

/// A placeholder and what it becomes.
pub const PLACEHOLDERS: [(&str, &str); 7] = [
    (
        "urls",
        "every URL of the process, one word each (a word of its own)",
    ),
    ("url", "one URL: the template runs once per object"),
    ("ca", "the PEM file of the server's certificate"),
    (
        "out",
        "an empty directory for the process's files (bodies); removed after the run",
    ),
    ("host", "the server's host"),
    ("port", "the server's port"),
    ("proto", "h1, h2 or h3"),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("--client exec: the template is empty")]
    Empty,
    #[error("--client exec: unbalanced quotes in `{0}`")]
    Quotes(String),
    #[error("--client exec: unknown placeholder `{{{0}}}`; known: {{urls}} {{url}} {{ca}} {{out}} {{host}} {{port}} {{proto}}")]
    Unknown(String),
    #[error("--client exec: `{{` without a closing `}}` in `{0}`")]
    Unclosed(String),
    #[error("--client exec: the template needs {{url}} or {{urls}}, not both")]
    Urls,
    #[error("--client exec: {{urls}} must be a word of its own, not part of `{0}`")]
    UrlsInWord(String),
    #[error("--client exec: the program (the first word) cannot be a placeholder")]
    Program,
}

/// A checked template.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Template {
    source: String,
    words: Vec<String>,
}

/// What the placeholders become for one process.
#[derive(Debug, Clone)]
pub struct Values<'a> {
    pub urls: &'a [String],
    pub ca: &'a str,
    pub out: &'a str,
    pub host: &'a str,
    pub port: u16,
    pub proto: &'a str,
}

/// `word`'s text and placeholders.
fn pieces(word: &str) -> Result<Vec<Piece>, TemplateError> {
    crate::words::pieces(word, &PLACEHOLDERS).map_err(|e| match e {
        WordError::Unknown(n) => TemplateError::Unknown(n),
        WordError::Unclosed(w) => TemplateError::Unclosed(w),
    })
}

impl Template {
    pub fn parse(source: &str) -> Result<Self, TemplateError> {
        let words =
            crate::words::split(source).ok_or_else(|| TemplateError::Quotes(source.to_string()))?;
        if words.is_empty() {
            return Err(TemplateError::Empty);
        }
        let (mut url, mut urls) = (false, false);
        for (i, w) in words.iter().enumerate() {
            let p = pieces(w)?;
            if i == 0 && p.iter().any(|p| matches!(p, Piece::Slot(_))) {
                return Err(TemplateError::Program);
            }
            for piece in &p {
                match piece {
                    Piece::Slot("url") => url = true,
                    Piece::Slot("urls") if p.len() == 1 => urls = true,
                    Piece::Slot("urls") => return Err(TemplateError::UrlsInWord(w.clone())),
                    _ => {}
                }
            }
        }
        if url == urls {
            return Err(TemplateError::Urls);
        }
        Ok(Self {
            source: source.to_string(),
            words,
        })
    }

    /// The program: the first word, its doubled braces single.
    pub fn program(&self) -> String {
        // Checked by `parse`: text alone.
        pieces(&self.words[0])
            .unwrap_or_default()
            .into_iter()
            .map(|p| match p {
                Piece::Text(t) => t,
                Piece::Slot(_) => String::new(),
            })
            .collect()
    }

    /// One process per object (`{url}`) rather than one per connection (`{urls}`).
    pub fn per_object(&self) -> bool {
        self.words
            .iter()
            .any(|w| pieces(w).is_ok_and(|p| p.contains(&Piece::Slot("url"))))
    }

    /// The command line for one process. With `{url}`, `v.urls` holds that one URL.
    pub fn expand(&self, v: &Values<'_>) -> Vec<String> {
        let mut argv = Vec::new();
        for w in &self.words {
            // Checked by `parse`.
            let p = pieces(w).unwrap_or_default();
            if p == [Piece::Slot("urls")] {
                argv.extend(v.urls.iter().cloned());
                continue;
            }
            let s = crate::words::fill(w, &PLACEHOLDERS, |name| match name {
                "url" => v.urls.first().cloned().unwrap_or_default(),
                "ca" => v.ca.to_string(),
                "out" => v.out.to_string(),
                "host" => v.host.to_string(),
                "port" => v.port.to_string(),
                "proto" => v.proto.to_string(),
                _ => String::new(),
            });
            argv.push(s);
        }
        argv
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn values<'a>(urls: &'a [String]) -> Values<'a> {
        Values {
            urls,
            ca: "/tmp/ca.pem",
            out: "/tmp/o",
            host: "198.18.0.2",
            port: 4433,
            proto: "h2",
        }
    }

    #[test]
    fn expands_each_placeholder() {
        let t = Template::parse("wget -q --ca-certificate={ca} -P '{out}/x y' {urls}").unwrap();
        assert_eq!(t.program(), "wget");
        assert!(!t.per_object());
        let urls = vec!["https://a/1".to_string(), "https://a/2".to_string()];
        assert_eq!(
            t.expand(&values(&urls)),
            [
                "wget",
                "-q",
                "--ca-certificate=/tmp/ca.pem",
                "-P",
                "/tmp/o/x y",
                "https://a/1",
                "https://a/2"
            ]
        );
        let one = Template::parse("fetch --to {host}:{port} --{proto} {url}").unwrap();
        assert!(one.per_object());
        assert_eq!(
            one.expand(&values(&urls[..1])),
            ["fetch", "--to", "198.18.0.2:4433", "--h2", "https://a/1"]
        );
    }

    #[test]
    fn refuses_bad_templates() {
        use TemplateError as E;
        assert_eq!(Template::parse(""), Err(E::Empty));
        assert_eq!(Template::parse("   "), Err(E::Empty));
        assert!(matches!(Template::parse("x 'a {url}"), Err(E::Quotes(_))));
        assert_eq!(
            Template::parse("x {uri}"),
            Err(E::Unknown("uri".to_string()))
        );
        assert!(matches!(Template::parse("x {url"), Err(E::Unclosed(_))));
        assert_eq!(Template::parse("x --ca {ca}"), Err(E::Urls));
        assert_eq!(Template::parse("x {url} {urls}"), Err(E::Urls));
        assert!(matches!(
            Template::parse("x --all={urls}"),
            Err(E::UrlsInWord(_))
        ));
        assert_eq!(Template::parse("{ca} {url}"), Err(E::Program));
    }

    #[test]
    fn doubled_braces_are_braces() {
        let t = Template::parse("jq -n '{{\"u\": \"{url}\"}}' --x={{url}}").unwrap();
        assert!(t.per_object());
        let urls = vec!["https://a/1".to_string()];
        assert_eq!(
            t.expand(&values(&urls)),
            ["jq", "-n", "{\"u\": \"https://a/1\"}", "--x={url}"]
        );
        // Still no placeholder in the program's name, and a lone `{` is still unclosed.
        assert_eq!(Template::parse("a{{b}} {urls}").unwrap().program(), "a{b}");
        assert!(matches!(
            Template::parse("x {{{url {urls}"),
            Err(TemplateError::Unclosed(_))
        ));
    }

    proptest! {
        /// Any text with its braces doubled comes out as itself.
        #[test]
        fn doubled_braces_come_out_as_written(lit in "[a-z{}=]{0,30}") {
            let doubled = lit.replace('{', "{{").replace('}', "}}");
            let t = Template::parse(&format!("prog '--x={doubled}' {{url}}")).unwrap();
            let urls = vec!["u".to_string()];
            let argv = t.expand(&values(&urls));
            prop_assert_eq!(argv[1].clone(), format!("--x={lit}"));
            prop_assert_eq!(argv[2].as_str(), "u");
        }

        #[test]
        fn any_template_is_a_value_or_an_error(s in r#"[a-z{}'" =/-]{0,60}"#) {
            if let Ok(t) = Template::parse(&s) {
                let urls = vec!["u".to_string()];
                let argv = t.expand(&values(&urls));
                prop_assert!(!argv.is_empty());
                prop_assert_eq!(argv[0].clone(), t.program());
            }
        }
    }
}
