//! Each program's command line, and how what it printed becomes timings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use qbench_core::client_program::{curl, lines, template, ClientProgram};
use qbench_core::errors::ErrorKind;
use qbench_core::report::third_party::AnchorEvent;
use qbench_core::Protocol;

use super::place::{ConnOut, ObjOut, Reported};
use super::process::{find, Ended, SpawnError};
use super::readers::ngtcp2_downloads;
use super::{Ctx, Invocation};
use crate::measure::clock::Clock;
use crate::setup::installed as driver;

/// The variable that says where qbench's quic-go client is.
pub(super) const QUICGO_ENV: &str = "QBENCH_QUICGO";

/// The program to run, found before the first run.
pub(super) fn locate(p: &ClientProgram) -> Result<PathBuf, SpawnError> {
    let missing = || SpawnError::Missing {
        program: p.program(),
        hint: p.install_hint().to_string(),
    };
    match p {
        ClientProgram::QuicGo => {
            if let Some(v) = std::env::var_os(QUICGO_ENV) {
                return find(&v.to_string_lossy()).ok_or_else(missing);
            }
        }
        ClientProgram::Chromium => {
            find("chromium").ok_or_else(missing)?;
            find("python3").ok_or_else(missing)?;
            let looked = driver::candidates(driver::CHROMIUM_DRIVER, driver::CHROMIUM_ENV);
            let Some(found) = looked.iter().find(|p| p.exists()) else {
                let places: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
                return Err(SpawnError::Missing {
                    program: driver::CHROMIUM_DRIVER.into(),
                    hint: format!(
                        "looked in {}; install qbench's {} there, or set {}",
                        places.join(", "),
                        driver::CHROMIUM_DRIVER,
                        driver::CHROMIUM_ENV
                    ),
                });
            };
            return match driver::trusted(found) {
                Ok(()) => Ok(found.clone()),
                Err(why) => Err(SpawnError::Untrusted {
                    program: found.display().to_string(),
                    why,
                }),
            };
        }
        _ => {}
    }
    find(&p.program()).ok_or_else(missing)
}

/// The version of programs that do not print it as they fetch: asked once, before the first
/// run.
pub(super) fn version(p: &ClientProgram, path: &Path) -> Option<String> {
    let (cmd, args): (&str, Vec<&str>) = match p {
        ClientProgram::H2load => (path.to_str()?, vec!["--version"]),
        // The example client has no --version: its package says which ngtcp2 it is.
        ClientProgram::Ngtcp2 => ("dpkg-query", vec!["-W", "-f=${Version}", "ngtcp2-client"]),
        _ => return None,
    };
    let out = std::process::Command::new(cmd)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next()?.trim();
    (out.status.success() && !first.is_empty()).then(|| match p {
        ClientProgram::Ngtcp2 => format!("ngtcp2-client {first}"),
        _ => first.to_string(),
    })
}

/// What shapes a program's figures besides the link and the server, said in every run's
/// record: ngtcp2 0.12's example client paces its packets with its default congestion
/// controller (cubic) at its window over the smoothed RTT, which is its 333 ms initial RTT
/// until a first sample; so its packet after the first Initial (its Finished, with its first
/// requests) waits about 22 ms whatever the path. Its BBR sets a pacing rate of its own and
/// does not wait; the adapter leaves the program's default in place, as shipped.
pub(super) fn notes(p: &ClientProgram, version: Option<&str>) -> Vec<String> {
    match (p, version) {
        (ClientProgram::Ngtcp2, Some(v)) if v.starts_with("ngtcp2-client 0.12.") => vec![
            "ngtcp2 0.12 paces its packets from its 333 ms initial RTT until its first RTT \
             sample (default congestion control, cubic): its Finished and first requests leave \
             about 22 ms after its first Initial, so on a path under about 22 ms of RTT its \
             handshake and first response wait for that timer (its --cc=bbr does not)"
                .to_string(),
        ],
        _ => Vec::new(),
    }
}

/// One process per object (an `exec:` template with `{url}`).
pub(super) fn per_object(p: &ClientProgram) -> bool {
    matches!(p, ClientProgram::Exec(t) if t.per_object())
}

/// What a program takes to start before it fetches anything (a browser).
pub(super) fn startup(p: &ClientProgram) -> Duration {
    match p {
        ClientProgram::Chromium => Duration::from_secs(15),
        _ => Duration::from_secs(2),
    }
}

/// The objects of each connection: round robin, as qbench's own connections take them.
fn split(ctx: &Ctx) -> Vec<Vec<usize>> {
    let k = ctx.connections.max(1).min(ctx.objects.len().max(1));
    let mut out = vec![Vec::new(); k];
    for i in 0..ctx.objects.len() {
        out[i % k].push(i);
    }
    out
}

fn s(x: impl ToString) -> String {
    x.to_string()
}

/// Seconds, as a program's command line takes them (`1.5`).
fn secs_arg(d: Duration) -> String {
    d.as_secs_f64().to_string()
}

/// An IPv6 literal in brackets, as curl's `--connect-to` wants it; names and IPv4 as they are.
fn bracketed(host: &str) -> String {
    match host.contains(':') && !host.starts_with('[') {
        true => format!("[{host}]"),
        false => host.to_string(),
    }
}

/// One process to start: its share of the run's objects and its own directory.
struct Process<'a> {
    /// The program, as the check before the first run found it (an absolute path).
    path: String,
    ca: Option<String>,
    objects: &'a [usize],
    urls: Vec<String>,
    dir: PathBuf,
}

/// The run's processes, with their files written into `dir`.
pub(super) fn invocations(ctx: &Ctx, dir: &Path) -> std::io::Result<Vec<Invocation>> {
    let groups: Vec<Vec<usize>> = match &ctx.program {
        ClientProgram::Chromium => vec![(0..ctx.objects.len()).collect()],
        p if per_object(p) => (0..ctx.objects.len()).map(|i| vec![i]).collect(),
        _ => split(ctx),
    };
    let mut out = Vec::new();
    for (n, objects) in groups.iter().enumerate() {
        let p = Process {
            path: ctx.path.display().to_string(),
            ca: ctx.ca.as_ref().map(|p| p.display().to_string()),
            objects,
            urls: objects
                .iter()
                .map(|&i| ctx.objects[i].url.clone())
                .collect(),
            dir: dir.join(format!("p{n}")),
        };
        std::fs::create_dir_all(&p.dir)?;
        let argv = match &ctx.program {
            ClientProgram::Curl => curl_argv(ctx, &p)?,
            ClientProgram::H2load => h2load_argv(ctx, &p),
            ClientProgram::Ngtcp2 => ngtcp2_argv(ctx, &p)?,
            ClientProgram::QuicGo => quic_go_argv(ctx, &p),
            ClientProgram::Chromium => chromium_argv(ctx, &p),
            ClientProgram::Exec(t) => exec_argv(ctx, t, &p),
        };
        out.push(Invocation {
            argv,
            objects: objects.clone(),
            dir: p.dir,
        });
    }
    Ok(out)
}

fn curl_argv(ctx: &Ctx, p: &Process<'_>) -> std::io::Result<Vec<String>> {
    let outputs: Vec<(String, String)> = p
        .objects
        .iter()
        .map(|&i| {
            let o = match ctx.verify {
                true => p.dir.join(format!("{i}")).display().to_string(),
                false => "/dev/null".into(),
            };
            (ctx.objects[i].url.clone(), o)
        })
        .collect();
    let config = p.dir.join("urls.conf");
    std::fs::write(&config, curl::config(&outputs))?;
    let mut a = vec![p.path.clone(), s("-sS"), s("--no-progress-meter")];
    a.push(s(match ctx.proto {
        Protocol::H1 => "--http1.1",
        _ => "--http2",
    }));
    match (&p.ca, ctx.insecure) {
        (Some(ca), _) => a.extend([s("--cacert"), ca.clone()]),
        (None, true) => a.push(s("--insecure")),
        (None, false) => {}
    }
    // IPv6 literals in brackets, on both sides (curl's --resolve has no way to name
    // a host that is an IPv6 literal).
    a.extend([
        s("--connect-to"),
        format!(
            "{}:{}:{}:{}",
            bracketed(&ctx.host),
            ctx.port,
            bracketed(&ctx.addr.ip().to_string()),
            ctx.addr.port()
        ),
    ]);
    // `--timeout` as qbench's own clients read it: no progress for that long (less
    // than a byte a second over it), and the connection (TCP and TLS) within it.
    a.extend([s("--connect-timeout"), secs_arg(ctx.timeout)]);
    a.extend([s("--speed-limit"), s("1")]);
    a.extend([
        s("--speed-time"),
        ctx.timeout.as_secs_f64().ceil().max(1.0).to_string(),
    ]);
    if let Some(st) = ctx.streams.filter(|&st| st > 1) {
        a.extend([s("--parallel"), s("--parallel-max"), st.to_string()]);
    }
    a.extend([
        s("-w"),
        s("%{json}\\n"),
        s("--config"),
        config.display().to_string(),
    ]);
    Ok(a)
}

fn h2load_argv(ctx: &Ctx, p: &Process<'_>) -> Vec<String> {
    // One client per process: h2load's log does not say which URI a line is, and
    // its clients would each cycle through every URI from the first.
    let mut a = vec![
        p.path.clone(),
        s("-n"),
        p.objects.len().to_string(),
        s("-c1"),
    ];
    a.extend([s("-m"), ctx.streams.unwrap_or(100).max(1).to_string()]);
    // Its inactivity timeout: nothing sent or received on the connection for that
    // long, as `--timeout` is for qbench's own clients (in whole milliseconds: it
    // refuses a fraction of a second).
    a.extend([s("-N"), format!("{}ms", ctx.timeout.as_millis().max(1))]);
    if ctx.proto == Protocol::H1 {
        a.push(s("--h1"));
    }
    a.extend([s("--connect-to"), ctx.addr.to_string()]);
    a.push(format!(
        "--log-file={}",
        p.dir.join("requests.log").display()
    ));
    a.extend(p.urls.iter().cloned());
    a
}

fn ngtcp2_argv(ctx: &Ctx, p: &Process<'_>) -> std::io::Result<Vec<String>> {
    let mut a = vec![p.path.clone(), s("-q"), s("--exit-on-all-streams-close")];
    a.push(format!("--download={}", p.dir.display()));
    let qlog = p.dir.join(super::readers::NGTCP2_QLOG);
    std::fs::create_dir_all(&qlog)?;
    a.push(format!("--qlog-dir={}", qlog.display()));
    a.push(format!("--timeout={}ms", ctx.timeout.as_millis()));
    a.extend([ctx.addr.ip().to_string(), ctx.addr.port().to_string()]);
    a.extend(ngtcp2_downloads(ctx, p.objects).into_iter().map(|d| d.0));
    Ok(a)
}

fn quic_go_argv(ctx: &Ctx, p: &Process<'_>) -> Vec<String> {
    let mut a = vec![p.path.clone()];
    a.extend([s("-ca"), p.ca.clone().unwrap_or_default()]);
    // Its -timeout bounds each request on the wall clock: grown by the process's
    // bytes at the floor rate, as its deadline is.
    let t = ctx.timeout + super::allowance(ctx, p.objects);
    a.extend([s("-timeout"), format!("{}ms", t.as_millis())]);
    a.extend([s("-streams"), ctx.streams.unwrap_or(0).to_string()]);
    if ctx.verify {
        a.push(s("-verify"));
    }
    a.extend(p.urls.iter().cloned());
    a
}

fn chromium_argv(ctx: &Ctx, p: &Process<'_>) -> Vec<String> {
    let mut a = vec![s("python3"), p.path.clone()];
    a.extend([s("--proto"), ctx.proto.to_string()]);
    a.extend([s("--ca"), p.ca.clone().unwrap_or_default()]);
    // Each load's limit on the wall clock: grown by its largest object at the
    // floor rate.
    let most = p
        .objects
        .iter()
        .map(|&i| super::allowance(ctx, &[i]))
        .max()
        .unwrap_or_default();
    a.extend([s("--timeout"), secs_arg(ctx.timeout + most)]);
    if ctx.reuse {
        a.push(s("--reuse"));
    }
    if ctx.verify {
        a.push(s("--verify"));
    }
    a.extend(p.urls.iter().cloned());
    a
}

fn exec_argv(ctx: &Ctx, t: &template::Template, p: &Process<'_>) -> Vec<String> {
    let mut a = t.expand(&template::Values {
        urls: &p.urls,
        ca: p.ca.as_deref().unwrap_or(""),
        out: &p.dir.display().to_string(),
        host: &ctx.host,
        port: ctx.port,
        proto: ctx.proto.as_str(),
    });
    // The program as the check before the first run found it (an absolute path):
    // the process runs in its own directory, where a relative one means another
    // file.
    a[0] = p.path.clone();
    a
}

/// What one ended process reported, on the run's clock.
pub(super) fn read(ctx: &Ctx, inv: &Invocation, e: &Ended, clock: Clock) -> Reported {
    let spawned = clock.offset_of(e.spawned);
    let mut r = match &ctx.program {
        ClientProgram::Curl => read_curl(ctx, inv, e, spawned),
        ClientProgram::H2load => super::readers::h2load(ctx, inv, e, clock),
        ClientProgram::Ngtcp2 => super::readers::ngtcp2(ctx, inv, e, clock),
        _ => read_lines(ctx, inv, e, clock),
    };
    if matches!(ctx.program, ClientProgram::Ngtcp2) || ctx.verify {
        super::readers::check_files(ctx, inv, &mut r);
    }
    r
}

fn secs(x: f64) -> Duration {
    Duration::try_from_secs_f64(x).unwrap_or_default()
}

/// curl's times are durations from each transfer's start; transfers of one process run one
/// after another (or, with `--parallel`, all from its spawn).
fn read_curl(ctx: &Ctx, inv: &Invocation, e: &Ended, spawned: Duration) -> Reported {
    let mut r = Reported {
        anchor: Some(AnchorEvent::Spawn),
        ..Reported::default()
    };
    let transfers = match curl::parse(&e.stdout) {
        Ok(t) => t,
        Err(err) => {
            r.problem = Some((ErrorKind::Protocol, err.to_string()));
            return r;
        }
    };
    let parallel = ctx.streams.is_some_and(|s| s > 1);
    let mut at = spawned;
    // With `--parallel`, a transfer that waits for another's connection counts from when it
    // joined the queue, and its `time_pretransfer` is then (curl 7.88) when it did: its
    // request leaves once that connection is up.
    let ready = transfers
        .iter()
        .filter(|t| t.num_connects > 0 && t.time_appconnect > 0.0)
        .map(|t| secs(t.time_appconnect))
        .min();
    for t in transfers {
        r.version = r
            .version
            .or_else(|| t.curl_version.clone().map(|v| format!("curl {v}")));
        let start = if parallel { spawned } else { at };
        at = start + secs(t.time_total);
        if t.num_connects > 0 {
            r.conns.push(ConnOut {
                started: start,
                handshake: (t.time_appconnect > 0.0).then(|| start + secs(t.time_appconnect)),
                error: None,
                local_port: Some(t.local_port).filter(|p| *p != 0),
                connected: (t.time_connect > 0.0).then(|| start + secs(t.time_connect)),
                one_way: None,
                odcid: None,
                alpn: t.http_version.as_deref().map(|v| match v {
                    "2" => "h2".to_string(),
                    _ => "http/1.1".to_string(),
                }),
            });
        }
        let index = t.urlnum.and_then(|n| inv.objects.get(n as usize).copied());
        let error = match (t.exitcode, t.response_code) {
            (0, 200..=299) => None,
            (0, code) => Some((ErrorKind::Status, format!("status {code}"))),
            (code, _) => Some((
                curl_kind(code),
                match t.errormsg.as_deref().filter(|m| !m.is_empty()) {
                    Some(m) => format!("curl exited {code}: {m}"),
                    None => format!("curl exited {code}"),
                },
            )),
        };
        let mut sent = start + secs(t.time_pretransfer);
        if let (true, 0, Some(ready)) = (parallel, t.num_connects, ready) {
            sent = sent.max(spawned + ready);
        }
        r.objects.push(ObjOut {
            index,
            sent,
            headers: (t.time_starttransfer > 0.0).then(|| start + secs(t.time_starttransfer)),
            done: start + secs(t.time_total),
            bytes: t.size_download,
            status: Some(t.response_code).filter(|c| *c != 0),
            error,
            verified: None,
            // Where qbench told it to write the body (its config's `output`), not where its
            // `filename_effective` says: that is the client's claim.
            file: index
                .filter(|_| ctx.verify)
                .map(|i| inv.dir.join(i.to_string())),
        });
    }
    r
}

/// curl's exit codes (`man curl`, EXIT CODES) by kind.
fn curl_kind(code: i32) -> ErrorKind {
    match code {
        6 => ErrorKind::Unreachable,
        7 => ErrorKind::Refused,
        28 => ErrorKind::Timeout,
        35 | 51 | 58 | 59 | 60 | 77 | 80 | 83 | 90 | 91 => ErrorKind::Tls,
        16 | 92 => ErrorKind::Protocol,
        18 => ErrorKind::ShortBody,
        52 | 55 | 56 => ErrorKind::Reset,
        22 => ErrorKind::Status,
        _ => ErrorKind::Io,
    }
}

/// Fetch lines (quic-go, Chromium, and `exec:` programs that print them).
fn read_lines(ctx: &Ctx, inv: &Invocation, e: &Ended, clock: Clock) -> Reported {
    let printed = match lines::parse(&e.stdout) {
        Ok(p) => p,
        Err(err) => {
            let mut r = Reported::server_timed();
            r.problem = Some((ErrorKind::Protocol, format!("its fetch lines: {err}")));
            return r;
        }
    };
    if printed.lines.is_empty() {
        let mut r = Reported::server_timed();
        r.version = printed.version;
        return r;
    }
    super::readers::from_lines(ctx, inv, e, clock, printed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drive::third_party::Object;

    fn ctx(urls: &[&str]) -> Ctx {
        Ctx {
            program: ClientProgram::Ngtcp2,
            proto: Protocol::H3,
            objects: urls
                .iter()
                .map(|u| Object {
                    url: u.to_string(),
                    expected: None,
                })
                .collect(),
            connections: 1,
            streams: None,
            reuse: false,
            verify: true,
            timeout: Duration::from_secs(1),
            addr: "198.18.0.1:4433".parse().unwrap(),
            host: "localhost".into(),
            port: 4433,
            ca: None,
            insecure: false,
            netns: None,
            path: PathBuf::from("gtlsclient"),
            cpu: None,
        }
    }

    /// Each program is given `--timeout` in a form it takes: h2load refuses `-N 1.5`, curl's
    /// `--speed-time` takes whole seconds.
    #[test]
    fn timeouts_are_spelled_as_each_program_takes_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = ctx(&["https://h/bytes/10"]);
        c.timeout = Duration::from_millis(1500);
        let mut argv = |p: ClientProgram| {
            c.program = p;
            invocations(&c, dir.path()).unwrap().remove(0).argv
        };
        let after = |a: &[String], flag: &str| {
            let i = a.iter().position(|x| x == flag).unwrap();
            a[i + 1].clone()
        };
        let h = argv(ClientProgram::H2load);
        assert_eq!(after(&h, "-N"), "1500ms");
        let k = argv(ClientProgram::Curl);
        assert_eq!(after(&k, "--speed-time"), "2");
        assert_eq!(after(&k, "--connect-timeout"), "1.5");
        assert!(!k.iter().any(|x| x == "--max-time"), "{k:?}");
    }

    /// A process's deadline grows with its objects' bytes at the floor rate: 40 MB at 1 Mbit/s
    /// is 320 s past `--timeout` and the start-up allowance; objects of unknown length add
    /// nothing.
    #[test]
    fn a_deadline_grows_with_the_bytes_expected() {
        let mut c = ctx(&["https://h/bytes/40000000", "https://h/x"]);
        c.program = ClientProgram::H2load;
        c.objects[0].expected = Some(40_000_000);
        let d = super::super::run_deadline(&c, &[0, 1]);
        assert_eq!(d, Duration::from_secs(1 + 320 + 2));
        assert_eq!(
            super::super::run_deadline(&c, &[1]),
            Duration::from_secs(1 + 2)
        );
    }

    #[test]
    fn ngtcp2_downloads_of_one_size_get_files_of_their_own() {
        let c = ctx(&[
            "https://h/bytes/10",
            "https://h/bytes/20",
            "https://h/bytes/10",
            "https://h/bytes/10",
            "https://h/x/..",
        ]);
        let d = ngtcp2_downloads(&c, &[0, 1, 2, 3, 4]);
        let names: Vec<_> = d.iter().map(|(_, n)| n.as_deref()).collect();
        assert_eq!(
            names,
            [
                Some("10?k=0"),
                Some("20"),
                Some("10?k=2"),
                Some("10?k=3"),
                None
            ]
        );
        assert_eq!(d[0].0, "https://h/bytes/10?k=0");
        assert_eq!(d[1].0, "https://h/bytes/20");
        // Only the objects one process fetches count: alone, a size keeps its plain name.
        let one = ngtcp2_downloads(&c, &[2, 1]);
        assert_eq!(one[0], ("https://h/bytes/10".into(), Some("10".into())));
    }

    /// 200,000 objects of 7 sizes: one pass names them (asking each object how many share
    /// its name was 4*10^10 comparisons, hours of CPU).
    #[test]
    fn ngtcp2_downloads_of_many_objects_are_named_in_one_pass() {
        let urls: Vec<String> = (0..200_000)
            .map(|i| format!("https://h/bytes/{}", i % 7))
            .collect();
        let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
        let c = ctx(&refs);
        let all: Vec<usize> = (0..urls.len()).collect();
        let d = ngtcp2_downloads(&c, &all);
        let names: std::collections::HashSet<_> = d.iter().map(|(_, n)| n.clone()).collect();
        assert_eq!(names.len(), 200_000);
        assert_eq!(d[199_999].1.as_deref(), Some("2?k=199999"));
    }
}
