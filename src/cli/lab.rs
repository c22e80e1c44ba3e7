//! `loadlens lab`: list, run (with the before/after table) and shell.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::lab;
use crate::units::parse_duration;

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// List the scenarios.
    List,
    /// Build a scenario's world, load it, and with --fix show before/after.
    Run(LabRunArgs),
    /// Build a scenario's fault and run `loadlens tune --apply` against it: it must find,
    /// apply and keep the scenario's own fix (or, with --try, revert a decoy).
    Tune(LabTuneArgs),
    /// Build a scenario's world and open a shell in its client namespace.
    Shell {
        /// Scenario name (see `loadlens lab list`).
        name: String,
        /// Show the ip/tc/sysctl commands that build the world.
        #[arg(short = 'v', long)]
        verbose: bool,
    },
}

#[derive(Args, Debug)]
pub struct LabRunArgs {
    /// Scenario name (see `loadlens lab list`).
    name: String,
    /// Apply the fix and run again: before/after table.
    #[arg(long)]
    fix: bool,
    /// Length of each load run.
    #[arg(short = 'd', long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "5s")]
    duration: Duration,
    /// Keep the world after each run until Enter is pressed.
    #[arg(long)]
    keep: bool,
    /// Show the ip/tc/sysctl commands that build the world.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Save each Run as DIR/<scenario>-before.json and -after.json.
    #[arg(long, value_name = "DIR")]
    json_dir: Option<PathBuf>,
    /// Print only the before/after table, not each run's report.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Do not profile the server (the lab profiles it by default; with --json-dir the
    /// flame graphs are saved there as <scenario>-before.svg and -after.svg).
    #[arg(long)]
    no_profile: bool,
    /// Do not watch where the server's threads slept (the off-CPU watch: the context
    /// switches when the server is profiled, its threads' states sampled otherwise).
    #[arg(long)]
    no_offcpu: bool,
    /// Watch the server over ssh, as a server on another machine is (`run --watch
    /// ssh://`): an sshd of the world's own, with keys of its own, runs in the server
    /// namespace.
    #[arg(long)]
    watch_ssh: bool,
    /// A parameter of the scenario's fault, e.g. `--param threads=2` (thread-pool);
    /// each scenario takes its own, within the range where its fault is decisive
    /// (`loadlens lab list`). Repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_param)]
    param: Vec<(String, String)>,
}

fn parse_param(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("`{s}`: want KEY=VALUE, e.g. threads=2")),
    }
}

#[derive(Args, Debug)]
pub struct LabTuneArgs {
    /// Scenario name (see `loadlens lab list`).
    name: String,
    /// Length of each load (the baseline and each side of each pair).
    #[arg(short = 'd', long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "3s")]
    duration: Duration,
    /// Try this change instead of the diagnosis's (a decoy), e.g. 'proxy_buffers 8 64k'.
    #[arg(long = "try", value_name = "'DIRECTIVE VALUE'")]
    try_change: Option<String>,
    /// A/B pairs per change.
    #[arg(long, default_value = "5", value_name = "N")]
    pairs: u32,
    /// Write the tune session's Run as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// What each load is judged by (tune's --objective) [default: the one that measures
    /// the scenario's fault: 'errors<1%' for a connection or open-files limit, throughput
    /// otherwise].
    #[arg(long)]
    objective: Option<String>,
    /// Without --apply: show the change, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Tune over ssh, as a server on another machine is (`tune --watch ssh://`): an
    /// sshd of the world's own, with keys of its own, runs in the server namespace, and
    /// the config is read, changed, tested and reloaded through it.
    #[arg(long)]
    watch_ssh: bool,
    /// Show the ip/tc/sysctl commands that build the world.
    #[arg(short = 'v', long)]
    verbose: bool,
}

pub fn cmd(c: LabCommand) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match c {
        LabCommand::List => out.write_all(lab::list().as_bytes())?,
        LabCommand::Shell { name, verbose } => lab::shell(&name, verbose)?,
        LabCommand::Tune(a) => {
            let o = lab::tune::TuneOptions {
                duration: a.duration,
                try_change: a.try_change,
                pairs: a.pairs,
                json: a.json,
                objective: a.objective,
                dry_run: a.dry_run,
                watch_ssh: a.watch_ssh,
                verbose: a.verbose,
            };
            let sc = lab::find(&a.name)?;
            out.write_all(
                format!(
                    "scenario {}: {}\n  fault:  {}\n  fix:    {}\n",
                    sc.name, sc.summary, sc.fault, sc.fix
                )
                .as_bytes(),
            )?;
            out.flush()?;
            drop(out);
            let code = lab::tune::tune(&a.name, &o)?;
            return Ok(ExitCode::from(code));
        }
        LabCommand::Run(a) => {
            let opts = lab::LabOptions {
                fix: a.fix,
                duration: a.duration,
                keep: a.keep,
                verbose: a.verbose,
                json_dir: a.json_dir,
                show_runs: !a.quiet,
                profile: !a.no_profile,
                offcpu: !a.no_offcpu,
                watch_ssh: a.watch_ssh,
                params: a.param,
            };
            let sc = lab::find(&a.name)?;
            if let Some(dir) = &opts.json_dir {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create --json-dir {}", dir.display()))?;
            }
            out.write_all(lab::header(&sc, &opts).as_bytes())?;
            out.flush()?;
            let r = lab::run(&a.name, &opts)?;
            out.write_all(b"\n")?;
            out.write_all(lab::table(&sc, &r).as_bytes())?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
