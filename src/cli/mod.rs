//! The command line: flags → [`Spec`], then the pipeline, then the views.
//! Flags follow wrk's where wrk has them.

mod progress;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::lab;
use crate::pipeline;
use crate::report::{self, Dest, Json, Output, Text};
use crate::run::Run;
use crate::spec::Spec;
use crate::units::{parse_count, parse_duration};
use crate::watch::discover::Hints;
use crate::watch::WatchSpec;

#[derive(Parser, Debug)]
#[command(
    name = "loadlens",
    version,
    about = "Load-test an HTTP server, watch the machine while it runs, and say where the bottleneck is",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load-test a URL and report throughput, latency and errors.
    Run(Box<RunArgs>),
    /// Render a Run saved with `--json` again.
    Report(ReportArgs),
    /// The long explanation of a finding id (mechanism, how to confirm, fixes, sources).
    Explain {
        /// A finding id, e.g. listen-queue-overflow; `list` for all.
        id: String,
    },
    /// Published nginx setups with a known fault and its fix, in network namespaces
    /// (needs root).
    #[command(subcommand)]
    Lab(LabCommand),
}

#[derive(Subcommand, Debug)]
enum LabCommand {
    /// List the scenarios.
    List,
    /// Build a scenario's world, load it, and with --fix show before/after.
    Run(LabRunArgs),
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
struct LabRunArgs {
    /// Scenario name (see `loadlens lab list`).
    name: String,
    /// Apply the fix and run again: before/after table.
    #[arg(long)]
    fix: bool,
    /// Length of each load run.
    #[arg(short = 'd', long, value_parser = parse_duration, default_value = "5s")]
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
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The URL to load, e.g. http://127.0.0.1:8080/index.html
    url: String,
    /// Connections to keep open.
    #[arg(short = 'c', long, value_parser = parse_u32, default_value = "10")]
    connections: u32,
    /// Worker threads [default: CPUs available to this process].
    #[arg(short = 't', long, value_parser = parse_u32)]
    threads: Option<u32>,
    /// Length of the test, e.g. 10s, 1m [default: 10s, or unbounded with -n].
    #[arg(short = 'd', long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Stop after this many requests (responses plus failed requests), e.g. 10k.
    #[arg(short = 'n', long, value_parser = parse_count)]
    requests: Option<u64>,
    /// Requests per connection, then close and reconnect (1 = a new TCP connection per
    /// request) [default: keep-alive as long as the server allows].
    #[arg(long, value_parser = parse_u32)]
    connreqs: Option<u32>,
    /// Open loop: this many requests per second over all connections, on schedule; latency
    /// is measured from each request's scheduled time (corrected for coordinated omission).
    #[arg(short = 'R', long, value_parser = parse_count)]
    rate: Option<u64>,
    /// Add a request header, e.g. -H 'Accept-Encoding: gzip' (repeatable).
    #[arg(short = 'H', long = "header")]
    headers: Vec<String>,
    /// HTTP method.
    #[arg(short = 'm', long, default_value = "GET")]
    method: String,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    body: Option<String>,
    /// Read the request body from a file.
    #[arg(long)]
    body_file: Option<PathBuf>,
    /// Per-request timeout; a request unanswered after it counts as a timeout.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    timeout: Duration,
    /// Print the latency percentiles, status codes and connection details.
    #[arg(long)]
    latency: bool,
    /// Write the Run as JSON to FILE (`-` = stdout, which silences the text output).
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Print nothing but errors (the JSON, if asked for, is still written).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Do not verify the server's TLS certificate.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Do not watch the machine (CPU, network, TCP counters, server processes).
    #[arg(long)]
    no_watch: bool,
    /// Sampling interval of the watch, e.g. 1s, 100ms.
    #[arg(long = "sample", value_parser = parse_duration, default_value = "1s")]
    sample: Duration,
    /// The server's process id (repeatable); its children are watched too. Needed when
    /// the server runs in another network namespace.
    #[arg(long = "server-pid")]
    server_pids: Vec<i32>,
    /// Watch the processes with this command name (repeatable), e.g. nginx, php-fpm8.2.
    #[arg(long = "server-name")]
    server_names: Vec<String>,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// A Run written by `loadlens run --json FILE`.
    file: PathBuf,
    /// Print the latency percentiles and details.
    #[arg(long)]
    latency: bool,
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let n = parse_count(s)?;
    u32::try_from(n).map_err(|_| format!("`{s}` is too large"))
}

/// Parses the command line and runs it. Usage errors exit 2 (clap's convention).
pub fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Run(a) => cmd_run(*a),
        Command::Report(a) => cmd_report(a),
        Command::Lab(c) => cmd_lab(c),
        Command::Explain { id } => cmd_explain(&id),
    };
    match res {
        Err(e) if is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        other => other,
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn available_cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

fn cmd_run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(p)) => std::fs::read(p)
            .with_context(|| format!("cannot read the body file {}", p.display()))?,
        (None, None) => Vec::new(),
    };
    let threads = a
        .threads
        .unwrap_or_else(|| available_cpus().min(a.connections.max(1)));
    let duration = match (a.duration, a.requests) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    };
    let spec = Spec {
        url: a.url.clone(),
        connections: a.connections,
        threads,
        duration_s: duration.map(|d| d.as_secs_f64()),
        requests: a.requests,
        connreqs: a.connreqs,
        rate: a.rate.map(|r| r as f64),
        method: a.method.to_ascii_uppercase(),
        headers: a.headers.clone(),
        body_bytes: body.len(),
        timeout_s: a.timeout.as_secs_f64(),
        insecure: a.insecure,
    };
    spec.check_flags()?;
    let target = spec.target()?;
    let addr = target.probe(spec.timeout())?;
    if a.sample < Duration::from_millis(100) {
        anyhow::bail!("--sample must be at least 100ms");
    }
    // The views, chosen by flag; fail before the load, not after it, when an output
    // cannot be written.
    let json = a.json.as_deref().map(Dest::parse);
    if let Some(d) = &json {
        d.check("JSON")?;
    }
    let text = !a.quiet && json != Some(Dest::Stdout);
    let mut outputs: Vec<Output<Run>> = Vec::new();
    outputs.extend(json.map(|d| Output::new(Json, d)));
    if text {
        outputs.push(Output::new(Text { latency: a.latency }, Dest::Stdout));
    }

    let stop = Arc::new(AtomicBool::new(false));
    // First Ctrl-C ends the run early and still reports; a second one kills.
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let mut progress = progress::LiveLine::new(text && std::io::stderr().is_terminal(), &spec);
    let job = pipeline::Job {
        spec: &spec,
        target: &target,
        addr,
        body: &body,
        watch: (!a.no_watch).then(|| WatchSpec {
            interval: a.sample,
            target: addr,
            hints: Hints {
                pids: a.server_pids.clone(),
                names: a.server_names.clone(),
            },
        }),
    };
    let run = pipeline::measure(job, stop, &mut progress);
    progress.finish();
    let run = run?;
    report::write_all(&run, &outputs)?;
    Ok(ExitCode::SUCCESS)
}

fn cmd_lab(c: LabCommand) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match c {
        LabCommand::List => out.write_all(lab::list().as_bytes())?,
        LabCommand::Shell { name, verbose } => lab::shell(&name, verbose)?,
        LabCommand::Run(a) => {
            let opts = lab::LabOptions {
                fix: a.fix,
                duration: a.duration,
                keep: a.keep,
                verbose: a.verbose,
                json_dir: a.json_dir,
                show_runs: !a.quiet,
            };
            let sc = lab::find(&a.name)?;
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

fn cmd_explain(id: &str) -> anyhow::Result<ExitCode> {
    let text = if id == "list" {
        crate::diagnose::explain::FINDINGS
            .iter()
            .map(|(i, line, _)| format!("{i:<28} {line}\n"))
            .collect()
    } else {
        match crate::diagnose::explain(id) {
            Some(t) => t,
            None => anyhow::bail!("unknown finding id `{id}`: `loadlens explain list` shows them"),
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn cmd_report(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("cannot read {}", a.file.display()))?;
    let run = Run::from_json(&text).with_context(|| format!("{}", a.file.display()))?;
    report::write_all(
        &run,
        &[Output::new(Text { latency: a.latency }, Dest::Stdout)],
    )?;
    Ok(ExitCode::SUCCESS)
}
