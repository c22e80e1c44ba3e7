//! `loadlens import har FILE [-o OUT]`: a browser's HAR recording written as a
//! `--targets` file (`spec::har`), with notes on stderr for what a run would refuse.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::spec::{har, targets};

#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// A HAR file (the browser's network panel, "Save all as HAR") as a --targets file:
    /// one JSON line per request with its method, URL, headers (less Host,
    /// Content-Length, connection and HTTP/2 pseudo-headers) and body.
    Har(HarArgs),
}

#[derive(Args, Debug)]
pub struct HarArgs {
    /// The HAR file (`-` = standard input).
    #[arg(value_name = "FILE")]
    file: String,
    /// Write the targets to OUT (`-` = standard output, the default).
    #[arg(short = 'o', long, value_name = "OUT", default_value = "-")]
    output: String,
}

pub fn cmd(c: ImportCommand) -> anyhow::Result<ExitCode> {
    match c {
        ImportCommand::Har(a) => cmd_har(a),
    }
}

/// At most this many entry indices are listed in a note (then "…").
const NOTE_MAX: usize = 5;

fn indices(list: &[(usize, String)]) -> String {
    let mut s: Vec<String> = list
        .iter()
        .take(NOTE_MAX)
        .map(|(i, what)| format!("log.entries[{i}] {what}"))
        .collect();
    if list.len() > NOTE_MAX {
        s.push("…".into());
    }
    s.join(", ")
}

fn cmd_har(a: HarArgs) -> anyhow::Result<ExitCode> {
    let text = targets::read_capped(&a.file, "HAR file").map_err(anyhow::Error::msg)?;
    let imported = har::import(&text, &a.file).map_err(anyhow::Error::msg)?;
    let mut out: String = imported.lines.join("\n");
    out.push('\n');
    if a.output == "-" {
        let mut so = std::io::stdout().lock();
        so.write_all(out.as_bytes())?;
        so.flush()?;
    } else {
        std::fs::write(&a.output, &out)
            .with_context(|| format!("cannot write the targets to {}", a.output))?;
    }
    let mut err = std::io::stderr().lock();
    if !imported.skipped.is_empty() {
        writeln!(
            err,
            "note: {} entries skipped, not http or https: {}",
            imported.skipped.len(),
            indices(&imported.skipped)
        )?;
    }
    if !imported.other_servers.is_empty() {
        writeln!(
            err,
            "note: {} entries are on another server than the first entry's {}: {} — every target of a run must share the run's host and port (`run --targets` refuses the others): remove them, or import and run them separately",
            imported.other_servers.len(),
            imported.server,
            indices(&imported.other_servers)
        )?;
    }
    if a.output != "-" {
        writeln!(
            err,
            "{} targets written to {}: `loadlens run --targets {} {}/`",
            imported.lines.len(),
            a.output,
            a.output,
            imported.server
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
