//! `loadlens attach RUN.json WATCH.json`: a Run made without a watch joined to a watch
//! run alone on the server (`loadlens watch URL --duration D --json WATCH.json`), by
//! wall clock (`remote::attach`), diagnosed again and shown like any Run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::compare::read_run;
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
    #[command(flatten)]
    out: super::merge::ViewArgs,
}

pub fn cmd(a: AttachArgs) -> anyhow::Result<ExitCode> {
    let views = a.out.views()?;
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
