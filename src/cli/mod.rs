//! The command line: flags → [`Spec`](crate::spec::Spec), then the pipeline, then the
//! views. Flags follow wrk's where wrk has them. One file per command family: `run`,
//! `lab`; `progress` is the live status line.

mod attach;
mod ci;
mod compare;
mod doctor;
mod history;
mod import;
mod lab;
mod load;
mod merge;
mod mix;
mod progress;
mod ray;
mod run;
mod sweep;
mod tune;
mod watch;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::report::{self, Dest, Output, Text};
use crate::units::parse_count;

#[derive(Parser, Debug)]
#[command(
    name = "loadlens",
    version,
    about = "Load-test an HTTP server, watch the machine while it runs, and say where the bottleneck is",
    after_long_help = ci::EXIT_STATUS,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load-test a URL and report throughput, latency and errors.
    Run(Box<run::RunArgs>),
    /// Compare saved Runs: the numbers side by side, each change with a verdict
    /// (significant / not significant / not enough data).
    Compare(compare::CompareArgs),
    /// Merge the segment Runs of a load split over machines (`run --segment I/N`) into
    /// the Run of the whole load: counts summed, histograms added, findings recomputed.
    Merge(merge::MergeArgs),
    /// Join a Run made without a watch to a watch run alone on the server (`loadlens
    /// watch URL --duration D --json FILE`), by wall clock, and diagnose it again.
    Attach(attach::AttachArgs),
    /// A study in one command: the cross product of comma-separated values (-c, -t,
    /// --connreqs, -R, URLs) as a table; or, with --ceiling --slo, the highest rate
    /// that meets a latency objective.
    Sweep(Box<sweep::SweepArgs>),
    /// Find the bottleneck and the change to its server's config that answers it, shown
    /// as a diff; with --apply, write it, reload, prove it by A/B pairs under the same
    /// load, and keep it only for a significant gain (otherwise put it back).
    Tune(Box<tune::TuneArgs>),
    /// Render a Run saved with `--json` again.
    Report(ReportArgs),
    /// Runs kept with `--save`: a test's series with its change points (E-divisive
    /// means), `--fail-on-regression` for CI; `export` and `import` of the database.
    History(history::HistoryArgs),
    /// Turn a recording into a --targets file (`import har FILE`: a browser's HAR).
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// The long explanation of a finding id (mechanism, how to confirm, fixes, sources).
    Explain {
        /// A finding id, e.g. listen-queue-overflow; `list` for all.
        id: String,
    },
    /// Which evidence this machine gives loadlens (perf, tracefs, schedstat, cgroups,
    /// sock_diag, a server's threads, io_uring) and what adds noise, each with its fix.
    Doctor(doctor::DoctorArgs),
    /// Print shell completions for bash, zsh or fish (`make install` installs them).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Watch the server's machine around a load sent from elsewhere, until standard
    /// input closes; the Evidence as JSON (what `run --ray --server-node-resource`
    /// starts on the server's node).
    #[command(hide = true)]
    Watch(watch::WatchArgs),
    /// Print the man page (roff; `make install` installs it).
    #[command(hide = true)]
    Man,
    /// Published nginx setups with a known fault and its fix, in network namespaces
    /// (needs root).
    #[command(subcommand)]
    Lab(lab::LabCommand),
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// A Run written by `loadlens run --json FILE`.
    file: PathBuf,
    /// Print the latency percentiles and details.
    #[arg(long)]
    latency: bool,
    /// Write the self-contained HTML report to FILE instead of printing the text.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Judge the saved Run (--slo) and write its CI files, as `run` would.
    #[command(flatten)]
    ci: ci::CiFlags,
    /// Keep the saved Run in the history database.
    #[command(flatten)]
    save: history::SaveFlags,
}

pub(super) fn parse_u32(s: &str) -> Result<u32, String> {
    let n = parse_count(s)?;
    u32::try_from(n).map_err(|_| format!("`{s}` is too large"))
}

/// Parses the command line and runs it. Usage errors exit 2 (clap's convention).
pub fn main() -> anyhow::Result<ExitCode> {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // A bad value is one line, like every other bad input (clap adds a help tip).
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            anyhow::bail!("{}", line.strip_prefix("error: ").unwrap_or(line));
        }
        Err(e) => e.exit(),
    };
    let res = match cli.command {
        Command::Run(a) if a.ray.address.is_some() => ray::cmd(*a),
        Command::Run(a) => run::cmd(*a),
        Command::Tune(a) => tune::cmd(*a),
        Command::Report(a) => cmd_report(a),
        Command::History(a) => history::cmd(a),
        Command::Lab(c) => lab::cmd(c),
        Command::Import(c) => import::cmd(c),
        Command::Compare(a) => compare::cmd(a),
        Command::Merge(a) => merge::cmd(a),
        Command::Attach(a) => attach::cmd(a),
        Command::Watch(a) => watch::cmd(a),
        Command::Sweep(a) => sweep::cmd(*a),
        Command::Completions { shell } => print(&completions(shell)),
        Command::Man => print(&man_page()?),
        Command::Explain { id } => cmd_explain(&id),
        Command::Doctor(a) => doctor::cmd(a),
    };
    match res {
        Err(e) if is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        other => other,
    }
}

/// A command line parsed and checked as `main` would, without running it: for `run`,
/// the Spec and request bytes it would send (see [`run::dry_run`]); `None` for other
/// commands. What the CLI fuzz target drives (`fuzz/`).
pub fn dry_run<I, T>(
    argv: I,
) -> anyhow::Result<Option<(crate::spec::Spec, crate::spec::RequestBytes)>>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::try_parse_from(argv)?.command {
        Command::Run(a) => Ok(Some(run::dry_run(&a)?)),
        _ => Ok(None),
    }
}

pub use compare::saved_run;

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

pub(super) fn available_cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

fn cmd_explain(id: &str) -> anyhow::Result<ExitCode> {
    let text = if id == "list" {
        crate::diagnose::explain::list()
    } else {
        let id: crate::diagnose::FindingId = id
            .parse()
            .map_err(|e| anyhow::anyhow!("{e} (`loadlens explain list` says what each means)"))?;
        crate::diagnose::explain::of(id)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn cmd_report(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let mut outputs = a.ci.outputs()?;
    let saver = a.save.open()?;
    let mut run = compare::read_run(&a.file)?;
    a.ci.judge(&mut run);
    if let Some(s) = &saver {
        s.save(&run)?;
    }
    match a.html {
        Some(f) => outputs.push(Output::new(report::Html, Dest::File(f))),
        None => outputs.push(Output::new(Text { latency: a.latency }, Dest::Stdout)),
    }
    report::write_all(&run, &outputs)?;
    if a.ci.slo.is_none() {
        // Rendering a saved Run again judges nothing: success, whatever it holds.
        return Ok(ExitCode::SUCCESS);
    }
    a.ci.finish(&run)
}

/// The clap definition of the whole command line (for the man page and completions).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Shell completions, generated from the clap definitions.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command(), "loadlens", &mut out);
    out
}

/// The man page (roff), generated from the clap definitions: the top-level page with
/// every subcommand's flags under SUBCOMMANDS.
pub fn man_page() -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let cmd = command();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("loadlens {}", sub.get_name());
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        // A section per command, titled with the command, its one-line summary first.
        writeln!(
            out,
            ".SH \"{}\"\n{}",
            name.to_uppercase(),
            about.replace('\\', "\\\\")
        )?;
        let sub_man = clap_mangen::Man::new(sub.clone().bin_name(name));
        sub_man.render_synopsis_section(&mut out)?;
        sub_man.render_options_section(&mut out)?;
    }
    writeln!(out, ".SH \"EXIT STATUS\"\n.nf")?;
    for line in ci::EXIT_STATUS.lines().skip(1) {
        writeln!(out, "{}", line.replace('\\', "\\\\"))?;
    }
    writeln!(out, ".fi")?;
    man.render_version_section(&mut out)?;
    Ok(out)
}

fn print(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
