//! `loadlens attach RUN.json WATCH.json`: a Run made without a watch joined to a watch
//! run alone on the server (`loadlens watch URL --duration D --json WATCH.json`), by
//! wall clock (`remote::attach`), diagnosed again and shown like any Run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::compare::read_run;
use super::merge::Views;
use crate::run::Evidence;

#[derive(Args, Debug)]
pub struct AttachArgs {
    /// A Run written by `loadlens run … --json FILE` (its own watch, if any, is
    /// replaced).
    #[arg(value_name = "RUN.json")]
    run: PathBuf,
    /// The Evidence written by `loadlens watch URL --duration D --json FILE` on the
    /// server, started before the load and ending after it.
    #[arg(value_name = "WATCH.json")]
    watch: PathBuf,
    /// Write the joined Run as JSON to FILE (`-` = stdout, which silences the text).
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Write the joined Run as a self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Print the latency percentiles and details.
    #[arg(long)]
    latency: bool,
    #[command(flatten)]
    ci: super::ci::CiFlags,
}

pub fn cmd(a: AttachArgs) -> anyhow::Result<ExitCode> {
    let views = Views::new(
        a.json.as_deref(),
        a.html.as_deref(),
        a.latency,
        false,
        &a.ci,
    )?;
    let mut run = read_run(&a.run)?;
    let name = a.watch.display().to_string();
    let text = std::fs::read_to_string(&a.watch).with_context(|| format!("cannot read {name}"))?;
    let ev: Evidence = serde_json::from_str(&text)
        .with_context(|| format!("{name} is not the Evidence of `loadlens watch --json`"))?;
    let (ev, warnings) = crate::remote::attach::join(&run, ev, &name)?;
    run.evidence = Some(ev);
    run.warnings.extend(warnings);
    views.write(run)
}
