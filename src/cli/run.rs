//! `loadlens run`: flags → Spec, the load (repeated if asked), the views.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::progress::LiveLine;
use super::{available_cpus, parse_u32};
use crate::pipeline;
use crate::report::{self, Dest, Json, Output, Text};
use crate::run::Run;
use crate::spec::Spec;
use crate::units::{parse_count, parse_duration};
use crate::watch::discover::Hints;
use crate::watch::WatchSpec;

#[derive(Args, Debug)]
pub struct RunArgs {
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
    /// Run the same load N times and report each repetition and the mean with its 95%
    /// interval (for `loadlens compare`).
    #[arg(long, value_parser = parse_u32, default_value = "1", value_name = "N")]
    repeat: u32,
    /// Pause between repetitions.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pause: Duration,
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

pub fn cmd(a: RunArgs) -> anyhow::Result<ExitCode> {
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
    let mut progress = LiveLine::new(text && std::io::stderr().is_terminal(), &spec);
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
    let bar = progress.bar();
    let repeat = a.repeat;
    let run = pipeline::measure_repeated(&job, repeat, a.pause, stop, &mut progress, &mut |i| {
        if let (Some(b), true) = (&bar, repeat > 1) {
            b.set_prefix(format!("repetition {} of {repeat}  ", i + 1));
        }
    });
    progress.finish();
    let run = run?;
    report::write_all(&run, &outputs)?;
    Ok(ExitCode::SUCCESS)
}
