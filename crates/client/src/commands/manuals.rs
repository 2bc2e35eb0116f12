//! `qbench completions` and `qbench man`: shell completions and man pages for qbench,
//! qbench-server and qbench-shaper, made from the same clap definitions that parse them.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::flags::tools::{CompletionsArgs, ManArgs, PageFormat, Program};

impl Program {
    const ALL: [Self; 3] = [Self::Qbench, Self::QbenchServer, Self::QbenchShaper];

    /// `qbench`'s own definition comes from the caller, which holds it.
    fn command(self, qbench: &clap::Command) -> clap::Command {
        match self {
            Self::Qbench => qbench.clone(),
            Self::QbenchServer => qbench_server::cli::Cli::command(),
            Self::QbenchShaper => qbench_shaper::cli::Cli::command(),
        }
    }
}

/// Prints the completion script on stdout (e.g. `qbench completions bash >
/// /etc/bash_completion.d/qbench`).
pub fn completions(args: CompletionsArgs, qbench: &clap::Command) -> anyhow::Result<()> {
    let mut cmd = args.program.command(qbench);
    let name = cmd.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, name, &mut script);
    crate::console::out(&String::from_utf8_lossy(&script));
    Ok(())
}

/// One page for `cmd` and one for each of its subcommands, named `parent-sub.1`.
fn pages(cmd: &clap::Command, dir: &Path, written: &mut usize) -> anyhow::Result<()> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut roff)
        .with_context(|| format!("rendering the page of {}", cmd.get_name()))?;
    let path = dir.join(format!("{}.1", cmd.get_name()));
    crate::export::write_text(&path, &String::from_utf8_lossy(&roff))?;
    *written += 1;
    for sub in cmd.get_subcommands() {
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        let named = sub.clone().name(name);
        pages(&named, dir, written)?;
    }
    Ok(())
}

/// Writes the pages of all three programs; `qbench` is this program's own definition.
pub fn man(args: ManArgs, qbench: &clap::Command) -> anyhow::Result<()> {
    qbench_engine::error::out_dir(&args.out)?;
    let mut written = 0;
    for p in Program::ALL {
        match args.format {
            PageFormat::Man => pages(&p.command(qbench), &args.out, &mut written)?,
            PageFormat::Markdown => {
                let cmd = p.command(qbench);
                let path = args.out.join(format!("{}.md", cmd.get_name()));
                crate::export::write_text(&path, &markdown(&cmd))?;
                written += 1;
            }
        }
    }
    let kind = match args.format {
        PageFormat::Man => "man pages",
        PageFormat::Markdown => "Markdown pages",
    };
    crate::say!("wrote {written} {kind} to {}", args.out.display());
    Ok(())
}

/// Every subcommand and flag of `cmd` with its help, as one Markdown page.
fn markdown(cmd: &clap::Command) -> String {
    let title = format!("`{}` command line", cmd.get_name());
    let options = clap_markdown::MarkdownOptions::new()
        .title(title)
        .show_footer(false);
    clap_markdown::help_markdown_command_custom(cmd, &options)
}

/// The book's table of a run's flags (docs/book/src/reference/flags.md): every flag of
/// `qbench` without a subcommand, with its help and its default, as `--help` gives them.
pub fn flag_table(qbench: &clap::Command) -> String {
    let mut page = String::from(
        "# Flags\n\n\
         The flags of a single run, with their defaults, generated from the definitions that \
         parse them\n(`crates/client/tests/it/manuals.rs` checks it). Every flag of every \
         program and subcommand,\nas `--help` prints it, is in [the generated \
         reference](cli/qbench.md).\n\n\
         | flag | meaning | default |\n| --- | --- | --- |\n",
    );
    for arg in qbench.get_arguments() {
        let Some(long) = arg.get_long().filter(|_| !arg.is_hide_set()) else {
            continue;
        };
        if matches!(long, "help" | "version") {
            continue;
        }
        let (help, default) = help_and_default(arg);
        let flag = match value_shape(arg) {
            Some(v) => format!("--{long} {v}"),
            None => format!("--{long}"),
        };
        page.push_str(&format!(
            "| `{}` | {} | {} |\n",
            cell(&flag),
            cell(&help),
            cell(&default)
        ));
    }
    page
}

/// What the flag takes: its value name, or the values it allows.
fn value_shape(arg: &clap::Arg) -> Option<String> {
    if !arg.get_action().takes_values() {
        return None;
    }
    let names: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    if !names.is_empty() {
        return Some(names.join("|"));
    }
    let value = arg
        .get_value_names()
        .and_then(|n| n.first())
        .map_or_else(|| arg.get_id().as_str().to_uppercase(), |n| n.to_string());
    Some(value)
}

/// The help's text without the `[default: ...]` it ends with, and the default: clap's own,
/// else the one the text names.
fn help_and_default(arg: &clap::Arg) -> (String, String) {
    let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    let mut help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut default: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if let Some(at) = help.rfind("[default: ").filter(|_| help.ends_with(']')) {
        let named = help[at + "[default: ".len()..help.len() - 1].to_string();
        help = help[..at].trim_end().to_string();
        if default.is_empty() {
            default.push(named);
        }
    }
    if !arg.get_action().takes_values() {
        default.clear();
    }
    if let Some(env) = arg.get_env() {
        help.push_str(&format!(" (also ${})", env.to_string_lossy()));
    }
    (help, default.join(", "))
}

/// Text for one cell of a Markdown table.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}
