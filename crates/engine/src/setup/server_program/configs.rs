//! Each server's command line and configuration, written by qbench from one template per
//! server, with qbench-server's matched settings where the server takes them and a record of
//! those it cannot. Every path in a configuration is relative to the run's directory (the
//! server's working directory): however the directory is named (spaces, quotes, `$(...)`),
//! no path is ever quoted into a configuration language, and the command line's words are
//! passed to the program as they are.

use qbench_core::server_program::{ServerProgram, ServerValues, Unmatched};
use qbench_core::wire::MAX_STREAMS;
use qbench_core::Protocol;

/// The run's files, relative to its directory.
pub(super) const CERT: &str = "cert.pem";
pub(super) const KEY: &str = "key.pem";
pub(super) const ROOT: &str = "www";

/// How one run's server is started.
pub(super) struct Launch {
    pub argv: Vec<String>,
    /// A configuration file (name in the run's directory, text), where the server takes one.
    pub config: Option<(&'static str, String)>,
    pub env: Vec<(&'static str, String)>,
}

/// What the launch needs to know of the run.
pub(super) struct Setting<'a> {
    pub program: &'a str,
    pub addr: &'a str,
    pub port: u16,
    pub threads: u32,
    pub proto: Protocol,
    /// Its own directory, absolute (for `{dir}`, `{root}` and the hypercorn app's root).
    pub dir: &'a str,
    /// `servers/hypercorn/qbench_files.py`, for hypercorn.
    pub app: Option<&'a str>,
    /// `--cc`, for ngtcp2 (the TCP servers' is their namespace's).
    pub cc: Option<&'a str>,
}

pub(super) fn launch(kind: &ServerProgram, s: &Setting<'_>) -> Launch {
    let listen = format!("{}:{}", s.addr, s.port);
    let words = |w: &[&str]| -> Vec<String> { w.iter().map(|w| w.to_string()).collect() };
    // Go's runtime takes as many threads as --server-threads gives qbench-server.
    let go = vec![("GOMAXPROCS", s.threads.to_string())];
    match kind {
        ServerProgram::Caddy => Launch {
            argv: words(&[
                s.program,
                "run",
                "--adapter",
                "caddyfile",
                "--config",
                "Caddyfile",
            ]),
            config: Some(("Caddyfile", caddyfile(s))),
            env: go,
        },
        ServerProgram::Nginx => Launch {
            // -p: the prefix every relative path of the configuration is taken from, the
            // working directory (nginx would read `$(` in a named prefix as a variable); -e:
            // its startup log before the configuration is read.
            argv: words(&[s.program, "-p", "./", "-c", "nginx.conf", "-e", "stderr"]),
            config: Some(("nginx.conf", nginx_conf(s))),
            env: Vec::new(),
        },
        ServerProgram::QuicGo => Launch {
            argv: words(&[
                s.program,
                "-addr",
                &listen,
                "-cert",
                CERT,
                "-key",
                KEY,
                "-root",
                ROOT,
                "-max-streams",
                &MAX_STREAMS.to_string(),
            ]),
            config: None,
            env: go,
        },
        ServerProgram::Ngtcp2 => {
            let mut argv = words(&[s.program, "-q", "-d", ROOT]);
            argv.push(format!("--max-streams-bidi={MAX_STREAMS}"));
            if let Some(cc) = s.cc {
                argv.push(format!("--cc={cc}"));
            }
            argv.extend(words(&[s.addr, &s.port.to_string(), KEY, CERT]));
            Launch {
                argv,
                config: None,
                env: Vec::new(),
            }
        }
        ServerProgram::Hypercorn => Launch {
            argv: words(&[
                s.program,
                "--config",
                "hypercorn.toml",
                &format!("{}:app", s.app.unwrap_or("qbench_files.py")),
            ]),
            config: Some(("hypercorn.toml", hypercorn_toml(s))),
            env: vec![("QBENCH_DOCROOT", format!("{}/{ROOT}", s.dir))],
        },
        ServerProgram::Exec(t) => Launch {
            argv: t.expand(&ServerValues {
                addr: s.addr,
                port: s.port,
                cert: &format!("{}/{CERT}", s.dir),
                key: &format!("{}/{KEY}", s.dir),
                root: &format!("{}/{ROOT}", s.dir),
                dir: s.dir,
                threads: s.threads,
                proto: s.proto.as_str(),
            }),
            config: None,
            env: Vec::new(),
        },
    }
}

fn caddyfile(s: &Setting<'_>) -> String {
    // No `log` directive: no access log. A client that sends no SNI (an IP address) gets the
    // site's certificate through default_sni.
    format!(
        "{{\n\tadmin off\n\tauto_https off\n\tdefault_sni {addr}\n\
         \tservers {{\n\t\tprotocols h1 h2 h3\n\t}}\n}}\n\
         https://{addr}:{port} {{\n\tbind {addr}\n\ttls {CERT} {KEY} {{\n\t\tprotocols tls1.3\n\t}}\n\
         \troot * {ROOT}\n\tfile_server\n}}\n",
        addr = s.addr,
        port = s.port,
    )
}

fn nginx_conf(s: &Setting<'_>) -> String {
    // Run as root, the workers would drop to `nobody`, who cannot read the run's directory.
    // SAFETY: geteuid has no preconditions.
    let user = if unsafe { libc::geteuid() } == 0 {
        "user root;\n"
    } else {
        ""
    };
    format!(
        "{user}daemon off;\nmaster_process on;\nworker_processes {threads};\npid nginx.pid;\n\
         error_log stderr warn;\nevents {{\n    worker_connections 4096;\n}}\n\
         http {{\n    access_log off;\n    default_type application/octet-stream;\n\
         \x20   client_body_temp_path tmp/body;\n    proxy_temp_path tmp/proxy;\n\
         \x20   fastcgi_temp_path tmp/fastcgi;\n    uwsgi_temp_path tmp/uwsgi;\n\
         \x20   scgi_temp_path tmp/scgi;\n    sendfile on;\n    tcp_nopush on;\n\
         \x20   keepalive_requests 4294967295;\n    keepalive_timeout 300s;\n\
         \x20   server {{\n        listen {addr}:{port} ssl{h2};\n\
         \x20       ssl_certificate {CERT};\n        ssl_certificate_key {KEY};\n\
         \x20       ssl_protocols TLSv1.3;\n        http2_max_concurrent_streams {MAX_STREAMS};\n\
         \x20       root {ROOT};\n    }}\n}}\n",
        threads = s.threads,
        addr = s.addr,
        port = s.port,
        h2 = if s.proto == Protocol::H2 {
            " http2"
        } else {
            ""
        },
    )
}

fn hypercorn_toml(s: &Setting<'_>) -> String {
    // workers = 0: one process, serving in itself. hypercorn's QUIC timer can swallow the
    // cancellation SIGTERM starts, and only in that process can the application's own
    // SIGTERM handler end it; a worker process never sees the signal.
    let quic = match s.proto {
        Protocol::H3 => format!("quic_bind = [\"{}:{}\"]\n", s.addr, s.port),
        _ => String::new(),
    };
    format!(
        "bind = [\"{addr}:{port}\"]\n{quic}certfile = \"{CERT}\"\nkeyfile = \"{KEY}\"\n\
         workers = 0\ngraceful_timeout = 1.0\nh2_max_concurrent_streams = {MAX_STREAMS}\n\
         keep_alive_max_requests = 4294967295\nkeep_alive_timeout = 300\n",
        addr = s.addr,
        port = s.port,
    )
}

/// The congestion control of a server's TCP: set in the server's namespace behind a link (its
/// own sysctl), or the default qbench could not change: the host's on loopback (qbench never
/// writes the host's sysctls), or a namespace's where the kernel would not take the run's (a
/// namespace may take only the host's `net.ipv4.tcp_allowed_congestion_control`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TcpCc {
    Set(String),
    HostDefault(String),
    NamespaceDefault { cc: String, allowed: String },
}

/// qbench-server's matched settings that `kind` does not take, for a run of `proto`.
pub(super) fn unmatched(
    kind: &ServerProgram,
    proto: Protocol,
    threads: u32,
    tcp: Option<&TcpCc>,
) -> Vec<Unmatched> {
    let u = |setting: &str, instead: &str| Unmatched {
        setting: setting.to_string(),
        instead: instead.to_string(),
    };
    let mut out = Vec::new();
    let h2 = proto == Protocol::H2;
    let h3 = proto == Protocol::H3;
    match tcp.filter(|_| !h3) {
        Some(TcpCc::HostDefault(cc)) if cc != "cubic" => out.push(u(
            "cc: cubic",
            &format!(
                "{cc}, the host's default (qbench never writes the host's sysctls; behind --link it is set in the server's namespace where the kernel allows)"
            ),
        )),
        Some(TcpCc::NamespaceDefault { cc, allowed }) => out.push(u(
            "cc: cubic",
            &format!(
                "{cc}, the server namespace's default: a namespace may take only the host's net.ipv4.tcp_allowed_congestion_control ({allowed}); --cc {cc} matches qbench-server to it"
            ),
        )),
        _ => {}
    }
    let own = |what: &str| u("cc: cubic", what);
    match kind {
        ServerProgram::Caddy => {
            if h2 {
                out.push(u(
                    &format!("h2 streams: {MAX_STREAMS}"),
                    "250, Go's HTTP/2 server's own (caddy 2.6 does not set it)",
                ));
            }
            if h3 {
                out.push(own(
                    "quic-go's own congestion controller (not settable in caddy)",
                ));
            }
        }
        ServerProgram::Nginx => {}
        ServerProgram::QuicGo => {
            out.push(own("quic-go's own congestion controller (not settable)"))
        }
        ServerProgram::Ngtcp2 => out.push(u(
            "TLS: rustls with ring",
            "GnuTLS, with its own TLS 1.3 suites and groups",
        )),
        ServerProgram::Hypercorn => {
            if threads > 1 {
                out.push(u(
                    &format!("threads: {threads}"),
                    "one process (hypercorn's workers would not see SIGTERM end an HTTP/3 transfer)",
                ));
            }
            if h3 {
                out.push(u(
                    &format!("h3 streams: {MAX_STREAMS}"),
                    "128, aioquic's own (hypercorn does not set it)",
                ));
                out.push(own("aioquic's own congestion controller (Reno)"));
            }
            out.push(u(
                "TLS 1.3 only",
                "hypercorn's ssl context also allows TLS 1.2 (the client offers 1.3 alone)",
            ));
        }
        ServerProgram::Exec(_) => out.push(u(
            "every matched setting",
            "a template's server is configured by its own command line",
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(proto: Protocol) -> Setting<'static> {
        Setting {
            program: "/usr/bin/x",
            addr: "198.18.2.2",
            port: 4433,
            threads: 2,
            proto,
            dir: "/tmp/a b/'$(x)'",
            app: Some("/opt/qbench_files.py"),
            cc: None,
        }
    }

    #[test]
    fn configurations_name_no_absolute_path() {
        for kind in [
            ServerProgram::Caddy,
            ServerProgram::Nginx,
            ServerProgram::Hypercorn,
        ] {
            let l = launch(&kind, &setting(Protocol::H2));
            let (_, text) = l.config.expect("a configuration file");
            assert!(!text.contains("/tmp"), "{kind}: {text}");
            assert!(text.contains("198.18.2.2"), "{kind}: {text}");
            assert!(text.contains("4433"), "{kind}: {text}");
        }
        let n = launch(&ServerProgram::Nginx, &setting(Protocol::H2));
        // nginx reads variables in `root` after its prefix is put in front: the prefix is the
        // working directory, never the directory's name.
        assert_eq!(n.argv[2], "./");
        let h = launch(&ServerProgram::Hypercorn, &setting(Protocol::H3));
        assert!(h
            .config
            .unwrap()
            .1
            .contains("quic_bind = [\"198.18.2.2:4433\"]"));
        assert_eq!(h.env[0].1, "/tmp/a b/'$(x)'/www");
    }

    #[test]
    fn a_tcp_servers_congestion_control_is_recorded_where_it_is_not_set() {
        let bbr = TcpCc::HostDefault("bbr".into());
        let u = unmatched(&ServerProgram::Nginx, Protocol::H2, 1, Some(&bbr));
        assert_eq!(u.len(), 1);
        assert!(u[0].instead.starts_with("bbr, the host's default"), "{u:?}");
        let set = TcpCc::Set("cubic".into());
        assert!(unmatched(&ServerProgram::Nginx, Protocol::H2, 1, Some(&set)).is_empty());
        let cubic = TcpCc::HostDefault("cubic".into());
        assert!(unmatched(&ServerProgram::Nginx, Protocol::H1, 1, Some(&cubic)).is_empty());
        // Over QUIC the server's own controller is what runs, whatever the kernel's default.
        let q = unmatched(&ServerProgram::Caddy, Protocol::H3, 1, Some(&bbr));
        assert_eq!(q.len(), 1);
        assert!(q[0].instead.contains("quic-go"), "{q:?}");
    }

    #[test]
    fn the_h3_servers_take_the_stream_limit_on_their_command_line() {
        let q = launch(&ServerProgram::QuicGo, &setting(Protocol::H3));
        assert!(q.argv.windows(2).any(|w| w == ["-max-streams", "256"]));
        let mut s = setting(Protocol::H3);
        s.cc = Some("bbr");
        let n = launch(&ServerProgram::Ngtcp2, &s);
        assert!(n.argv.contains(&"--cc=bbr".to_string()), "{:?}", n.argv);
        assert_eq!(
            n.argv[n.argv.len() - 4..],
            ["198.18.2.2", "4433", KEY, CERT]
        );
    }
}
