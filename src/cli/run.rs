//! `loadlens run`: flags → Spec, the load (repeated if asked), the views.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::load::{stop_on_signals, LoadFlags, Shape};
use super::progress::LiveLine;
use super::{available_cpus, parse_u32};
use crate::pipeline;
use crate::report::{self, Dest, Json, Output, Text};
use crate::run::Run;
use crate::spec::{RequestBytes, Spec};
use crate::units::{parse_count, parse_duration};

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
    #[arg(short = 'd', long, value_parser = parse_duration, allow_hyphen_values = true)]
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
    /// Print the latency percentiles, status codes and connection details.
    #[arg(long)]
    latency: bool,
    /// Write the Run as JSON to FILE (`-` = stdout, which silences the text output).
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Write a flame graph of the server's CPU (an SVG that opens in a browser,
    /// searchable) to FILE; implies --profile.
    #[arg(long, value_name = "FILE.svg")]
    flamegraph: Option<std::path::PathBuf>,
    /// Write the self-contained HTML report (charts, findings, profile) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Print nothing but errors (the JSON, if asked for, is still written).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Run the same load N times and report each repetition and the mean with its 95%
    /// interval (for `loadlens compare`).
    #[arg(long, value_parser = parse_u32, default_value = "1", value_name = "N")]
    repeat: u32,
    /// Pause between repetitions.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "2s")]
    pause: Duration,
    #[command(flatten)]
    load: LoadFlags,
}

impl RunArgs {
    /// The load's shape, with the defaults for what was not given.
    fn shape(&self) -> Shape {
        let threads = self
            .threads
            .unwrap_or_else(|| available_cpus().min(self.connections.max(1)));
        let duration = match (self.duration, self.requests) {
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(Duration::from_secs(10)),
        };
        Shape {
            url: self.url.clone(),
            connections: self.connections,
            threads,
            duration,
            requests: self.requests,
            connreqs: self.connreqs,
            rate: self.rate.map(|r| r as f64),
        }
    }
}

/// `run` up to the point where it would touch anything (no file read, no name
/// resolved, no limit raised): the flags checked into a Spec, the URL parsed, the
/// request bytes built. A `--body-file` counts as empty here.
pub fn dry_run(a: &RunArgs) -> anyhow::Result<(Spec, RequestBytes)> {
    let body = a.load.body.clone().unwrap_or_default().into_bytes();
    let spec = a.load.checked_spec(a.shape(), body.len())?;
    let target = spec.parse_url()?;
    let request = RequestBytes::build(&spec, &target, &body);
    Ok((spec, request))
}

pub fn cmd(mut a: RunArgs) -> anyhow::Result<ExitCode> {
    if a.flamegraph.is_some() {
        a.load.profile = true;
    }
    let body = a.load.body()?;
    let spec = a.load.spec(a.shape(), body.len())?;
    let target = spec.target()?;
    let addr = target.probe(spec.timeout())?;
    // The views, chosen by flag; fail before the load, not after it, when an output
    // cannot be written.
    let json = a.json.as_deref().map(Dest::parse);
    if let Some(d) = &json {
        d.check("JSON")?;
    }
    if let Some(f) = &a.flamegraph {
        Dest::File(f.clone()).check("flame graph")?;
        if a.load.no_watch {
            anyhow::bail!("--flamegraph profiles the watched server: drop --no-watch");
        }
    }
    let text = !a.quiet && json != Some(Dest::Stdout);
    let mut outputs: Vec<Output<Run>> = Vec::new();
    outputs.extend(json.map(|d| Output::new(Json, d)));
    outputs.extend(report::html_output(a.html.as_deref())?);
    if text {
        outputs.push(Output::new(Text { latency: a.latency }, Dest::Stdout));
    }

    let stop = stop_on_signals()?;
    let mut progress = LiveLine::new(text && std::io::stderr().is_terminal(), &spec);
    let job = pipeline::Job {
        spec: &spec,
        target: &target,
        addr,
        body: &body,
        watch: a.load.watch(addr),
    };
    let bar = progress.bar();
    let repeat = a.repeat;
    let run = pipeline::measure_repeated(
        &job,
        repeat,
        a.pause,
        stop.flag.clone(),
        &mut progress,
        &mut |i| {
            if let (Some(b), true) = (&bar, repeat > 1) {
                b.set_prefix(format!("repetition {} of {repeat}  ", i + 1));
            }
        },
    );
    progress.finish();
    let mut run = run?;
    run.interrupted = stop.signal().map(String::from);
    report::write_all(&run, &outputs)?;
    if let Some(f) = &a.flamegraph {
        // No profile (not permitted, nothing ran) is said, not fatal: the run stands.
        if let Err(e) = report::flamegraph::write(&run, f) {
            eprintln!("warning: no flame graph written to {}: {e:#}", f.display());
        }
    }
    Ok(stop.exit_code())
}
