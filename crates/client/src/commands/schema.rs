//! `qbench schema`: the JSON Schemas of the documents qbench writes, as `docs/schema/` holds
//! them.

use std::path::PathBuf;

use qbench_core::schema::{all_files, pretty, schema, SchemaKind};

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("what").required(true))]
pub struct SchemaArgs {
    /// The document: run, merge, compare, compete, sweep-cell, cost, diff, interval (a
    /// --json-stream line) or scenario
    #[arg(value_enum, group = "what")]
    pub kind: Option<SchemaKind>,

    /// Write every schema into DIR as KIND.schema.json instead (replacing those files)
    #[arg(long, value_name = "DIR", group = "what")]
    pub dir: Option<PathBuf>,
}

pub fn command(args: SchemaArgs) -> anyhow::Result<()> {
    let dir = match (args.kind, args.dir) {
        (Some(kind), _) => {
            crate::console::out(&pretty(&schema(kind)));
            return Ok(());
        }
        (None, Some(dir)) => dir,
        (None, None) => anyhow::bail!("qbench schema: give a KIND or --dir DIR"),
    };
    std::fs::create_dir_all(&dir).map_err(|e| qbench_engine::plan::error::ConfigError {
        flag: "--dir",
        message: format!("{}: {e}", dir.display()),
    })?;
    for (name, text) in all_files() {
        crate::export::write_text(&dir.join(name), &text)?;
    }
    crate::tell!(
        "wrote {} schemas into {}",
        SchemaKind::ALL.len(),
        dir.display()
    );
    Ok(())
}
