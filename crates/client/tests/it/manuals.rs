//! Shell completions and man pages for the three programs, from their clap definitions, and
//! `--version` naming the commit it was built from.

use crate::common;

use common::qbench_plain;

#[test]
fn completions_for_every_shell_and_program() {
    for program in ["qbench", "qbench-server", "qbench-shaper"] {
        for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
            let r = qbench_plain(&["completions", shell, "--for", program]);
            assert_eq!(r.code, Some(0), "{shell} {program}: {}", r.stderr);
            assert!(r.stdout.contains(program), "{shell} {program}");
        }
    }
    let bash = qbench_plain(&["completions", "bash"]).stdout;
    for flag in ["--shard", "--start-at", "--hgrm", "--metric"] {
        assert!(bash.contains(flag), "{flag}");
    }
    // The bash script is valid bash.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("qbench.bash");
    std::fs::write(&file, &bash).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .status()
        .unwrap();
    assert!(check.success());
    let server = qbench_plain(&["completions", "bash", "--for", "qbench-server"]).stdout;
    assert!(server.contains("--cert-out") && server.contains("--max-connections"));

    let bad = qbench_plain(&["completions", "tcsh"]);
    assert_eq!(bad.code, Some(2));
    assert!(
        bad.stderr.lines().next().unwrap().contains("'tcsh'"),
        "{}",
        bad.stderr
    );
}

#[test]
fn man_pages_for_programs_and_subcommands() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let r = qbench_plain(&["man", "--out", out.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut pages: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for want in [
        "qbench.1",
        "qbench-compare.1",
        "qbench-merge.1",
        "qbench-server.1",
        "qbench-shaper.1",
        "qbench-shaper-up.1",
    ] {
        assert!(pages.iter().any(|p| p == want), "{want} in {pages:?}");
    }
    let merge = std::fs::read_to_string(out.join("qbench-merge.1")).unwrap();
    assert!(merge.contains(".TH qbench-merge") && merge.contains("union of their windows"));

    let bad = qbench_plain(&["man", "--out", "/proc/qbench-man"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(
        bad.stderr.starts_with("error: --out: /proc/qbench-man"),
        "{}",
        bad.stderr
    );
}

#[test]
fn version_names_the_commit_in_a_checkout() {
    let r = qbench_plain(&["--version"]);
    assert_eq!(r.code, Some(0));
    assert!(
        r.stdout
            .starts_with(concat!("qbench ", env!("CARGO_PKG_VERSION"))),
        "{}",
        r.stdout
    );
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.git")
        .exists();
    if checkout {
        assert!(r.stdout.contains("(git "), "{}", r.stdout);
    }
}

/// The book's command-line reference is what the definitions that parse the flags say: a
/// flag added, renamed or re-documented without regenerating it fails here
/// (`qbench man --format markdown --out docs/book/src/reference/cli`).
#[test]
fn the_books_command_line_reference_is_current() {
    let dir = tempfile::tempdir().unwrap();
    let out = qbench_plain(&[
        "man",
        "--format",
        "markdown",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let book =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/book/src/reference/cli");
    for name in ["qbench.md", "qbench-server.md", "qbench-shaper.md"] {
        let made = std::fs::read_to_string(dir.path().join(name)).unwrap();
        let committed = std::fs::read_to_string(book.join(name)).unwrap_or_default();
        assert!(
            made == committed,
            "docs/book/src/reference/cli/{name} is stale: run qbench man --format markdown --out docs/book/src/reference/cli"
        );
    }
}

/// The book's table of a run's flags is made from the same definitions: a flag added,
/// renamed, re-documented or given another default without regenerating it fails here
/// (`QBENCH_BLESS=1 cargo test -p qbench --test it manuals::the_books_flag_table` writes it).
#[test]
fn the_books_flag_table_is_current() {
    use clap::CommandFactory;
    let made = qbench::commands::manuals::flag_table(&qbench::flags::cli::Cli::command());
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/book/src/reference/flags.md");
    if std::env::var_os("QBENCH_BLESS").is_some() {
        std::fs::write(&path, &made).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        made == committed,
        "docs/book/src/reference/flags.md is stale: run QBENCH_BLESS=1 cargo test -p qbench --test it manuals::the_books_flag_table"
    );
    for row in [
        "| `--proto h1\\|h2\\|h3` | Protocol to benchmark | h3 |",
        "| `--reuse` |",
    ] {
        assert!(made.contains(row), "{row}");
    }
}

/// clap reads `{n}` in a help text as a line break, so a doc comment's `/bytes/{n}` once
/// printed as "`/bytes/" and a dangling line: every help line must close its backticks.
#[test]
fn help_texts_keep_their_code_spans_whole() {
    use clap::CommandFactory;
    fn walk(cmd: &mut clap::Command, path: &str, bad: &mut Vec<String>) {
        let help = cmd.render_long_help().to_string();
        for line in help.lines() {
            if line.matches('`').count() % 2 == 1 {
                bad.push(format!("{path}: {line}"));
            }
        }
        for sub in cmd.get_subcommands_mut() {
            let name = format!("{path} {}", sub.get_name());
            walk(sub, &name, bad);
        }
    }
    let mut bad = Vec::new();
    let mut qbench = qbench::flags::cli::Cli::command();
    qbench.build();
    walk(&mut qbench, "qbench", &mut bad);
    walk(
        &mut qbench_server::cli::Cli::command(),
        "qbench-server",
        &mut bad,
    );
    walk(
        &mut qbench_shaper::cli::Cli::command(),
        "qbench-shaper",
        &mut bad,
    );
    assert!(bad.is_empty(), "{bad:#?}");
}
