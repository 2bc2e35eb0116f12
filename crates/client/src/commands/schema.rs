//! `qbench schema`: the JSON Schemas of the documents qbench writes, as `docs/schema/` holds
//! them.

use qbench_core::schema::{all_files, pretty, schema, SchemaKind};

use crate::flags::tools::SchemaArgs;

pub fn command(args: SchemaArgs) -> anyhow::Result<()> {
    let dir = match (args.kind, args.dir) {
        (Some(kind), _) => {
            crate::console::out(&pretty(&schema(kind)));
            return Ok(());
        }
        (None, Some(dir)) => dir,
        (None, None) => anyhow::bail!("qbench schema: give a KIND or --dir DIR"),
    };
    std::fs::create_dir_all(&dir).map_err(|e| qbench_engine::error::ConfigError {
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
