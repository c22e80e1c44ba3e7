//! Views of a [`Run`](crate::run::Run): each a renderer, none of them measures anything.

pub mod during;
pub mod terminal;

use std::io::Write;

use anyhow::Context;

use crate::run::Run;

/// Writes the Run as JSON to `path` (`-` = stdout).
pub fn write_json(run: &Run, path: &str) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(run).expect("a Run always serialises");
    if path == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()?;
    } else {
        std::fs::write(path, text + "\n").with_context(|| format!("cannot write {path}"))?;
    }
    Ok(())
}
