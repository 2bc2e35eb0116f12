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
