//! A page profile read from a HAR 1.2 file (a browser's network log): the objects a page
//! load fetches, their origins, and the dependency level at which a browser discovers each.
//!
//! Pure: the caller reads the file and passes its text. Every entry of `log.entries` becomes
//! an object, whichever page of the log it belongs to.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Most entries read: bounds the bookkeeping a stray multi-gigabyte log could ask for.
pub const MAX_ENTRIES: usize = 100_000;
/// Largest response body accepted: the most qbench-server sends as one object (10 GB).
pub const MAX_OBJECT_SIZE: u64 = crate::wire::MAX_OBJECT;
/// Characters of a URL or value quoted in an error: data: URLs run to megabytes.
const SHOWN_CHARS: usize = 120;

/// One object of a page, in the order the HAR lists entries (sorted by start time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PageObject {
    /// The entry's request URL as written.
    pub url: String,
    /// Index into `PageProfile::origins`.
    pub origin: usize,
    /// Response body bytes to fetch.
    pub size: u64,
    /// Dependency level: 0 needs nothing, n + 1 is revealed by an object of level n.
    pub level: u32,
    /// Index (into `objects`) of the object that revealed it.
    pub parent: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PageProfile {
    /// "scheme://host:port", with the default port written out (https → 443, http → 80),
    /// lower-case host, in first-seen order.
    pub origins: Vec<String>,
    pub objects: Vec<PageObject>,
}

/// A page to replay (`--page FILE.har`): the profile read from the file, kept in the run's
/// configuration so that a report says what it replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PageSpec {
    /// The HAR file's name (without its directory).
    pub name: String,
    pub profile: PageProfile,
}

/// Why a HAR was refused. Messages are one line and never name the file: the caller does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HarError {
    #[error("not valid JSON (line {line}, column {column}): {detail}")]
    Json {
        line: usize,
        column: usize,
        detail: String,
    },
    #[error("truncated JSON (line {line}, column {column}): the text ends inside a value")]
    Truncated { line: usize, column: usize },
    #[error("not a HAR file: {0}")]
    NotHar(&'static str),
    #[error("the HAR has no entries (log.entries is empty)")]
    NoEntries,
    #[error("the HAR has {0} entries; at most {MAX_ENTRIES} are read")]
    TooManyEntries(usize),
    /// `index` is the entry's 0-based position in `log.entries` as written; `url` is its
    /// request URL, shortened and with control characters escaped, when it has one.
    #[error("entry {index}{}: {problem}", url_part(.url.as_deref()))]
    Entry {
        index: usize,
        url: Option<String>,
        problem: EntryProblem,
    },
}

/// What is wrong with one entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    #[error("not a JSON object")]
    NotAnObject,
    #[error("request.url is missing or not a string")]
    MissingUrl,
    #[error("the URL does not parse: {0}")]
    BadUrl(String),
    #[error("scheme \"{0}\" is not http or https")]
    UnsupportedScheme(String),
    #[error("response size is missing (no response.content.size or response.bodySize)")]
    MissingSize,
    #[error("response size is negative ({0})")]
    NegativeSize(String),
    #[error("{field} is not a whole number of bytes ({value})")]
    BadSize { field: &'static str, value: String },
    #[error("response size {0} is above the 10 GB a qbench server sends as one object")]
    SizeTooLarge(String),
    #[error("startedDateTime is missing")]
    MissingStart,
    #[error("startedDateTime is not an RFC 3339 date-time ({value}): {reason}")]
    BadStart { value: String, reason: String },
    #[error("time is missing")]
    MissingTime,
    #[error("time is not a number ({0})")]
    BadTime(String),
    #[error("time is negative ({0})")]
    NegativeTime(String),
}

fn url_part(url: Option<&str>) -> String {
    url.map_or_else(String::new, |u| format!(" ({u})"))
}

/// Keeps messages one line and short whatever the file holds.
fn shown(s: &str) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == SHOWN_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl PageProfile {
    /// Reads every entry of `log.entries`, sorts them by start (stably), and finds each one's
    /// parent: the latest earlier entry with the URL its `_initiator` names (fragments
    /// aside); failing that, the earlier entry that finished last at or before its start.
    pub fn from_har(text: &str) -> Result<Self, HarError> {
        // Some Windows tools write a byte-order mark, which JSON does not allow; columns on
        // the first line are then counted from after it.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if text.trim().is_empty() {
            return Err(HarError::NotHar("the text is empty"));
        }
        let root: Value = serde_json::from_str(text).map_err(json_error)?;
        let log = root
            .get("log")
            .filter(|l| l.is_object())
            .ok_or(HarError::NotHar("no \"log\" object"))?;
        let entries = log
            .get("entries")
            .and_then(Value::as_array)
            .ok_or(HarError::NotHar("no \"log.entries\" array"))?;
        if entries.is_empty() {
            return Err(HarError::NoEntries);
        }
        if entries.len() > MAX_ENTRIES {
            return Err(HarError::TooManyEntries(entries.len()));
        }
        let entries = entries
            .iter()
            .enumerate()
            .map(|(index, e)| read_entry(index, e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(link(&entries))
    }

    /// All objects' sizes added up, saturating.
    pub fn total_bytes(&self) -> u64 {
        self.objects
            .iter()
            .fold(0u64, |sum, o| sum.saturating_add(o.size))
    }

    /// Number of levels (the highest level + 1); 0 without objects.
    pub fn levels(&self) -> u32 {
        self.objects
            .iter()
            .map(|o| o.level.saturating_add(1))
            .max()
            .unwrap_or(0)
    }
}

fn json_error(e: serde_json::Error) -> HarError {
    let (line, column) = (e.line(), e.column());
    if e.is_eof() {
        return HarError::Truncated { line, column };
    }
    let full = e.to_string();
    let detail = full
        .strip_suffix(&format!(" at line {line} column {column}"))
        .unwrap_or(&full);
    HarError::Json {
        line,
        column,
        detail: detail.to_string(),
    }
}

/// One entry, checked, before sorting.
#[derive(Debug)]
struct Entry<'a> {
    url: &'a str,
    origin: String,
    size: u64,
    /// Nanoseconds since the Unix epoch: offsets differ between entries of one log.
    start: i128,
    finish: i128,
    initiator: Option<&'a str>,
}

fn read_entry(index: usize, entry: &Value) -> Result<Entry<'_>, HarError> {
    let fail = |url: Option<&str>, problem| HarError::Entry {
        index,
        url: url.map(shown),
        problem,
    };
    if !entry.is_object() {
        return Err(fail(None, EntryProblem::NotAnObject));
    }
    let url = entry
        .pointer("/request/url")
        .and_then(Value::as_str)
        .ok_or_else(|| fail(None, EntryProblem::MissingUrl))?;
    let at = |problem| fail(Some(url), problem);
    let origin = origin_of(url).map_err(at)?;
    let size = response_size(entry).map_err(at)?;
    let start = started(entry).map_err(at)?;
    let time_ns = duration_ns(entry).map_err(at)?;
    Ok(Entry {
        url,
        origin,
        size,
        start,
        finish: start.saturating_add(time_ns),
        initiator: initiator_url(entry),
    })
}

/// A size field as found: absent (or null), negative (as written), or bytes.
enum SizeField {
    Absent,
    Negative(String),
    Bytes(u64),
}

fn size_field(v: Option<&Value>, field: &'static str) -> Result<SizeField, EntryProblem> {
    let v = match v {
        None | Some(Value::Null) => return Ok(SizeField::Absent),
        Some(v) => v,
    };
    let written = || shown(&v.to_string());
    // Whole floats (12.0, 1e3) are sizes too; the cast saturates, which the checks below
    // turn into "negative" or "too large".
    let whole = match v {
        Value::Number(n) => n.as_i64().map(i128::from).or_else(|| {
            n.as_u64()
                .map(i128::from)
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i128))
        }),
        _ => None,
    };
    match whole {
        None => Err(EntryProblem::BadSize {
            field,
            value: written(),
        }),
        Some(n) if n < 0 => Ok(SizeField::Negative(written())),
        Some(n) if n > i128::from(MAX_OBJECT_SIZE) => Err(EntryProblem::SizeTooLarge(written())),
        Some(n) => Ok(SizeField::Bytes(n as u64)),
    }
}

/// HAR writes -1 for "unknown"; content.size is the body as the page sees it, bodySize what
/// crossed the wire, so content.size wins when both are known.
fn response_size(entry: &Value) -> Result<u64, EntryProblem> {
    let content = size_field(
        entry.pointer("/response/content/size"),
        "response.content.size",
    )?;
    let body = size_field(entry.pointer("/response/bodySize"), "response.bodySize")?;
    match (content, body) {
        (SizeField::Bytes(n), _) | (_, SizeField::Bytes(n)) => Ok(n),
        (SizeField::Negative(v), _) | (SizeField::Absent, SizeField::Negative(v)) => {
            Err(EntryProblem::NegativeSize(v))
        }
        (SizeField::Absent, SizeField::Absent) => Err(EntryProblem::MissingSize),
    }
}

fn started(entry: &Value) -> Result<i128, EntryProblem> {
    let bad = |value: &Value, reason: String| EntryProblem::BadStart {
        value: shown(&value.to_string()),
        reason,
    };
    match entry.get("startedDateTime") {
        None | Some(Value::Null) => Err(EntryProblem::MissingStart),
        Some(v @ Value::String(s)) => OffsetDateTime::parse(s, &Rfc3339)
            .map(OffsetDateTime::unix_timestamp_nanos)
            .map_err(|e| bad(v, e.to_string())),
        Some(v) => Err(bad(v, "not a string".to_string())),
    }
}

fn duration_ns(entry: &Value) -> Result<i128, EntryProblem> {
    match entry.get("time") {
        None | Some(Value::Null) => Err(EntryProblem::MissingTime),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(ms) if ms < 0.0 => Err(EntryProblem::NegativeTime(n.to_string())),
            // JSON has no NaN or infinity; a huge time saturates, which only makes the
            // entry finish after every other start.
            Some(ms) => Ok((ms * 1e6).round() as i128),
            None => Err(EntryProblem::BadTime(n.to_string())),
        },
        Some(v) => Err(EntryProblem::BadTime(shown(&v.to_string()))),
    }
}

/// The URL of what made the browser fetch this entry: Chrome's `_initiator` (its `url`, or
/// the top frame of its script stack, through the async `parent`s while a stack is empty),
/// or WebPageTest's plain string.
fn initiator_url(entry: &Value) -> Option<&str> {
    let init = entry.get("_initiator")?;
    if let Some(u) = non_empty(Some(init)).or_else(|| non_empty(init.get("url"))) {
        return Some(u);
    }
    // serde_json's recursion limit bounds this chain.
    let mut stack = init.get("stack");
    while let Some(s) = stack {
        let top = s
            .get("callFrames")
            .and_then(Value::as_array)
            .and_then(|frames| frames.first());
        if let Some(u) = non_empty(top.and_then(|f| f.get("url"))) {
            return Some(u);
        }
        stack = s.get("parent");
    }
    None
}

fn non_empty(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|u| !u.is_empty())
}

fn without_fragment(url: &str) -> &str {
    url.split_once('#').map_or(url, |(u, _)| u)
}

/// "scheme://host:port" of an http or https URL. Hand-rolled rather than a full URL parser:
/// only the origin is needed, and browsers write HAR URLs already normalised.
fn origin_of(url: &str) -> Result<String, EntryProblem> {
    let bad = |why: &str| EntryProblem::BadUrl(why.to_string());
    if url.is_empty() {
        return Err(bad("it is empty"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it has whitespace or a control character"));
    }
    let scheme = url
        .split_once(':')
        .map(|(s, _)| s)
        .filter(|s| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
        .ok_or_else(|| bad("it has no scheme"))?
        .to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return Err(EntryProblem::UnsupportedScheme(shown(&scheme))),
    };
    let rest = url[scheme.len() + 1..]
        .strip_prefix("//")
        .ok_or_else(|| bad("no \"//\" after the scheme"))?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("the IPv6 address has no closing \"]\""))?;
        let ipv6 = |c: char| c.is_ascii_hexdigit() || c == ':' || c == '.';
        if !addr.contains(':') || !addr.chars().all(ipv6) {
            return Err(bad("the IPv6 address is malformed"));
        }
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| bad("text after the IPv6 address"))?,
            ),
        };
        (format!("[{}]", addr.to_ascii_lowercase()), port)
    } else {
        let (host, port) = match host_port.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        };
        if host.is_empty() {
            return Err(bad("the host is empty"));
        }
        // RFC 3986 reg-name without percent-encoding; non-ASCII (IDN) hosts pass as written.
        let allowed =
            |c: char| !c.is_ascii() || c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=".contains(c);
        if !host.chars().all(allowed) {
            return Err(bad("the host has a character hosts cannot have"));
        }
        (host.to_lowercase(), port)
    };
    let port = match port {
        None | Some("") => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|_| p.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad("the port is not a number from 0 to 65535"))?,
    };
    Ok(format!("{scheme}://{host}:{port}"))
}

/// Sorts the entries by start and gives each its parent and level, in one pass: every parent
/// comes earlier in start order.
fn link(entries: &[Entry<'_>]) -> PageProfile {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| entries[i].start);

    let mut origins: Vec<String> = Vec::new();
    let mut origin_index: HashMap<&str, usize> = HashMap::new();
    let mut objects: Vec<PageObject> = Vec::with_capacity(entries.len());
    // Latest-starting object (so far) per URL without fragment.
    let mut by_url: HashMap<&str, usize> = HashMap::new();
    // Earlier objects not yet finished at the current start, soonest finish first: starts
    // only grow, so once finished an object stays finished for every later one.
    let mut running: BinaryHeap<Reverse<(i128, usize)>> = BinaryHeap::new();
    let mut finished_last: Option<(i128, usize)> = None;

    for (k, e) in order.iter().map(|&i| &entries[i]).enumerate() {
        while let Some(&Reverse((finish, j))) = running.peek() {
            if finish > e.start {
                break;
            }
            running.pop();
            if finished_last.is_none_or(|last| (finish, j) > last) {
                finished_last = Some((finish, j));
            }
        }
        let parent = e
            .initiator
            .and_then(|u| by_url.get(without_fragment(u)).copied())
            .or(finished_last.map(|(_, j)| j));
        let origin = *origin_index.entry(&e.origin).or_insert_with(|| {
            origins.push(e.origin.clone());
            origins.len() - 1
        });
        objects.push(PageObject {
            url: e.url.to_string(),
            origin,
            size: e.size,
            level: parent.map_or(0, |p| objects[p].level + 1),
            parent,
        });
        by_url.insert(without_fragment(e.url), k);
        running.push(Reverse((e.finish, k)));
    }
    PageProfile { origins, objects }
}

#[cfg(test)]
mod tests;
