//! curl's `-w '%{json}\n'` output: one JSON object per transfer, times in seconds from the
//! transfer's start.

use serde::Deserialize;

/// One transfer, as curl reports it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Transfer {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub url_effective: Option<String>,
    #[serde(default)]
    pub response_code: u16,
    #[serde(default)]
    pub size_download: u64,
    #[serde(default)]
    pub time_connect: f64,
    #[serde(default)]
    pub time_appconnect: f64,
    #[serde(default)]
    pub time_pretransfer: f64,
    #[serde(default)]
    pub time_starttransfer: f64,
    #[serde(default)]
    pub time_total: f64,
    /// New connections this transfer made (0: it reused one).
    #[serde(default)]
    pub num_connects: u64,
    #[serde(default)]
    pub local_port: u16,
    /// curl's error code for this transfer (0: none).
    #[serde(default)]
    pub exitcode: i32,
    #[serde(default)]
    pub errormsg: Option<String>,
    #[serde(default)]
    pub http_version: Option<String>,
    /// Where the body went (the `output` of the config file).
    #[serde(default)]
    pub filename_effective: Option<String>,
    /// The transfer's place in the config file's URLs, from 0.
    #[serde(default)]
    pub urlnum: Option<u64>,
    #[serde(default)]
    pub curl_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CurlError {
    #[error("curl's output, line {line}: {message}")]
    Bad { line: usize, message: String },
    #[error("curl's output, line {line}: a time is negative, not a number or over a day")]
    Time { line: usize },
}

impl Transfer {
    pub fn url(&self) -> &str {
        self.url_effective
            .as_deref()
            .or(self.url.as_deref())
            .unwrap_or("")
    }
}

/// Every transfer curl wrote; lines not starting with `{` are skipped.
pub fn parse(text: &str) -> Result<Vec<Transfer>, CurlError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let t = raw.trim();
        if !t.starts_with('{') {
            continue;
        }
        let line = i + 1;
        let tr: Transfer = serde_json::from_str(t).map_err(|e| CurlError::Bad {
            line,
            message: e.to_string(),
        })?;
        let times = [
            tr.time_connect,
            tr.time_appconnect,
            tr.time_pretransfer,
            tr.time_starttransfer,
            tr.time_total,
        ];
        if times.iter().any(|t| !(0.0..=86_400.0).contains(t)) {
            return Err(CurlError::Time { line });
        }
        out.push(tr);
    }
    Ok(out)
}

/// The `--config` file that fetches `urls`, each body to its output (`/dev/null` when
/// bodies are not kept).
pub fn config(urls: &[(String, String)]) -> String {
    let mut s = String::new();
    for (url, output) in urls {
        s.push_str(&format!(
            "url = \"{}\"\noutput = \"{}\"\n",
            escape(url),
            escape(output)
        ));
    }
    s
}

/// A value inside a config file's double quotes: curl reads `\\`, `\"`, `\t`, `\n`, `\r` and
/// `\v` there, and a raw line break would end the line and start another option.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Two transfers on one h2 connection, as curl 7.88 writes them (fields trimmed).
    const TWO: &str = r#"{"content_type":"application/octet-stream","errormsg":null,"exitcode":0,"filename_effective":"/tmp/o/0","http_version":"2","local_port":40046,"num_connects":1,"response_code":200,"size_download":1000,"time_appconnect":0.004663,"time_pretransfer":0.004718,"time_starttransfer":0.005544,"time_total":0.005601,"url":"https://127.0.0.1:4433/bytes/1000","url_effective":"https://127.0.0.1:4433/bytes/1000"}
{"errormsg":"Failed to connect","exitcode":7,"local_port":0,"num_connects":0,"response_code":0,"size_download":0,"time_appconnect":0,"time_pretransfer":0,"time_starttransfer":0,"time_total":0.0002,"url":"https://127.0.0.1:9/bytes/1"}
"#;

    #[test]
    fn reads_transfers() {
        let t = parse(TWO).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].response_code, t[0].size_download, t[0].num_connects),
            (200, 1000, 1)
        );
        assert_eq!(t[0].local_port, 40046);
        assert_eq!(t[1].exitcode, 7);
        assert_eq!(t[1].url(), "https://127.0.0.1:9/bytes/1");
    }

    #[test]
    fn refuses_bad_times_and_lines() {
        assert!(matches!(
            parse(r#"{"time_total":-1}"#),
            Err(CurlError::Time { line: 1 })
        ));
        assert!(matches!(
            parse("x\n{nope"),
            Err(CurlError::Bad { line: 2, .. })
        ));
    }

    #[test]
    fn config_quotes() {
        let c = config(&[("https://h/a\"b".into(), "/dev/null".into())]);
        assert_eq!(c, "url = \"https://h/a\\\"b\"\noutput = \"/dev/null\"\n");
    }

    /// A newline or carriage return in a URL stays inside its quoted value: it never
    /// starts a line of its own (an `output` of the config's choosing, say).
    #[test]
    fn config_line_breaks_stay_in_their_value() {
        let url = "https://h/a\noutput = \"/etc/x\"\r\nurl = \"https://evil/\"";
        let c = config(&[(url.into(), "/dev/null".into())]);
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 2, "{c}");
        assert!(lines[0].starts_with("url = \"https://h/a\\n"), "{c}");
        assert_eq!(lines[1], "output = \"/dev/null\"");
    }

    proptest! {
        /// Whatever a URL holds, the config has two lines for it.
        #[test]
        fn any_url_is_two_config_lines(url in "\\PC{0,40}|[\n\r\t\"\\\\a]{0,20}") {
            let c = config(&[(url, "/dev/null".into())]);
            prop_assert_eq!(c.matches('\n').count(), 2);
            prop_assert!(!c.contains('\r'));
        }

        #[test]
        fn any_output_is_a_value_or_an_error(text in r#"[{}":,a-z_0-9. -]{0,200}"#) {
            let _ = parse(&text);
        }
    }
}
