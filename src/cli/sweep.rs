//! `loadlens sweep`: a study in one command — a grid of loads (comma-separated values
//! per flag, the cross product run cell by cell) or, with `--ceiling --slo`, the
//! highest open-loop rate that meets a latency objective.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Args;

use super::load::{stop_on_signals, LoadFlags, Shape};
use super::mix::MixFlags;
use super::{available_cpus, parse_u32};
use crate::engine::Silent;
use crate::pipeline;
use crate::report::sweep::{SweepCsv, SweepText};
use crate::report::{self, Dest, Json, Output};
use crate::run::{Run, Sweep, SWEEP_SCHEMA_VERSION};
use crate::slo::{Objective, Objectives};
use crate::spec::Spec;
use crate::sweep::ceiling::{self, Search};
use crate::sweep::{run_grid, Grid};
use crate::units::{parse_count, parse_duration};

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The URLs to load; several (comma-separated or repeated) make one dimension of
    /// the study, e.g. objects of different sizes.
    #[arg(required = true, value_delimiter = ',', value_name = "URL")]
    urls: Vec<String>,
    /// Connections, e.g. 10,50,100.
    #[arg(short = 'c', long, value_delimiter = ',', value_parser = parse_u32, default_value = "10")]
    connections: Vec<u32>,
    /// Worker threads, e.g. 1,2 [default: CPUs available to this process].
    #[arg(short = 't', long, value_delimiter = ',', value_parser = parse_u32)]
    threads: Vec<u32>,
    /// Requests per connection, e.g. 1,4,14,keep-alive [default: keep-alive].
    #[arg(long, value_delimiter = ',', value_parser = parse_connreqs)]
    connreqs: Vec<Option<u32>>,
    /// Open-loop rates, requests/s over all connections, e.g. 1k,2k,4k [default:
    /// closed loop]. With --ceiling the rates are searched instead.
    #[arg(short = 'R', long, value_delimiter = ',', value_parser = parse_count)]
    rate: Vec<u64>,
    /// Length of each cell's load [default: 5s; with --replay, the log's requests, as
    /// long as they take].
    #[arg(short = 'd', long, value_parser = parse_duration, allow_hyphen_values = true)]
    duration: Option<Duration>,
    /// Repeat each cell N times (the cell's Run holds every repetition).
    #[arg(long, value_parser = parse_u32, default_value = "1", value_name = "N")]
    repeat: u32,
    /// Pause between loads, so TIME_WAIT and queues settle the same way before each.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "1s")]
    pause: Duration,
    /// Find the highest open-loop rate that meets --slo (and --errors): a closed-loop
    /// probe, then rates that climb and bisect.
    #[arg(long, requires = "slo", conflicts_with = "replay")]
    ceiling: bool,
    /// The objectives of --ceiling, in `run --slo`'s grammar, at least one about
    /// latency: e.g. 'p99<200ms', 'p99.9<=1s,max<500ms', 'p99<200ms,errors<0.1%'.
    #[arg(long, value_parser = Objectives::parse, value_name = "OBJECTIVES")]
    slo: Option<Objectives>,
    /// The error budget of --ceiling: the share of failed or non-2xx/3xx requests
    /// allowed, e.g. '<0.1%' (the objective `errors<0.1%`; a bare '0.1%' is `<=`).
    #[arg(long, value_parser = parse_errors, requires = "ceiling")]
    errors: Option<Objective>,
    /// Total time the --ceiling search may take; it never starts a load that would
    /// not fit.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "2m")]
    budget: Duration,
    /// Write the study (every cell's Run) as JSON to FILE (`-` = stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Write one CSV line per cell to FILE (`-` = stdout).
    #[arg(long, value_name = "FILE")]
    csv: Option<String>,
    /// Write the study as a self-contained HTML page (the curve and the table) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Print nothing but errors (the files asked for are still written).
    #[arg(short = 'q', long)]
    quiet: bool,
    #[command(flatten)]
    mix: MixFlags,
    #[command(flatten)]
    load: LoadFlags,
}

/// A cell's length when -d is not given.
const DEFAULT_DURATION: Duration = Duration::from_secs(5);

/// `--errors '<0.1%'` as the objective `errors<0.1%` (a bare `0.1%` allows 0.1%).
fn parse_errors(s: &str) -> anyhow::Result<Objective> {
    let t = s.trim();
    if t.starts_with('<') {
        Objective::parse(&format!("errors{t}"))
    } else {
        Objective::parse(&format!("errors<={t}"))
    }
}

fn parse_connreqs(s: &str) -> Result<Option<u32>, String> {
    match s {
        "keep-alive" | "keepalive" | "ka" => Ok(None),
        _ => match parse_u32(s)? {
            0 => Err("requests per connection must be at least 1 (or keep-alive)".into()),
            n => Ok(Some(n)),
        },
    }
}

pub fn cmd(a: SweepArgs) -> anyhow::Result<ExitCode> {
    a.mix.check(&a.load)?;
    let duration = match (a.duration, a.mix.replay.is_some()) {
        (Some(d), _) => Some(d),
        (None, true) => None,
        (None, false) => Some(DEFAULT_DURATION),
    };
    let body = a.load.body()?;
    let mut grid = Grid {
        urls: a.urls.clone(),
        connections: a.connections.clone(),
        threads: if a.threads.is_empty() {
            vec![available_cpus()]
        } else {
            a.threads.clone()
        },
        connreqs: if a.connreqs.is_empty() {
            vec![None]
        } else {
            a.connreqs.clone()
        },
        rates: if a.rate.is_empty() {
            vec![None]
        } else {
            a.rate.iter().map(|r| Some(*r as f64)).collect()
        },
        mixes: Vec::new(),
    };
    if a.ceiling {
        let one = |n: usize, what: &str| {
            if n > 1 {
                anyhow::bail!("--ceiling searches one load: give one {what}")
            }
            Ok(())
        };
        one(grid.urls.len(), "URL")?;
        one(grid.connections.len(), "-c")?;
        one(grid.threads.len(), "-t")?;
        one(grid.connreqs.len(), "--connreqs")?;
        if !a.rate.is_empty() {
            anyhow::bail!("--ceiling searches the rate itself: leave out -R");
        }
        if a.slo
            .as_ref()
            .is_some_and(|o| !o.0.iter().any(|x| x.is_latency()))
        {
            anyhow::bail!(
                "--ceiling searches at a latency objective: give one in --slo, e.g. 'p99<200ms'"
            );
        }
    }
    // Every cell's spec, checked (and each URL probed) before any load.
    let mut base = a.load.spec(
        Shape {
            url: grid.urls[0].clone(),
            connections: grid.connections[0],
            threads: grid.threads[0].min(grid.connections[0]),
            duration,
            requests: None,
            connreqs: grid.connreqs[0],
            rate: grid.rates[0],
        },
        body.len(),
    )?;
    // The mix, read against each URL (its paths are the URL's server's), every cell of
    // a URL sending the same requests in the same order.
    if a.mix.any() {
        if a.mix.file() == Some("-") && grid.urls.len() > 1 {
            anyhow::bail!(
                "standard input is read once: give the mix in a file to sweep several URLs"
            );
        }
        for url in &grid.urls {
            let mix = a.mix.read(&crate::spec::split_credentials(url).0)?;
            let mut spec = base.clone();
            MixFlags::apply(mix, &mut spec, a.duration);
            grid.mixes.push(spec.mix.clone());
            if grid.mixes.len() == 1 {
                base = spec;
            }
        }
    }
    for p in grid.plan(&base) {
        p.spec.check_flags()?;
        super::load::ensure_fd_limit(p.spec.connections)?;
    }
    for url in &grid.urls {
        let spec = Spec {
            url: url.clone(),
            ..base.clone()
        };
        spec.target()?.probe(spec.timeout())?;
    }
    let outputs = outputs(&a)?;
    // One channel to the server's watch for every cell; a day at most.
    let remote = a.load.remote(Duration::from_secs(24 * 3600), a.quiet)?;

    let stop = stop_on_signals()?;
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::with_draw_target(
            None,
            indicatif::ProgressDrawTarget::stderr_with_hz(4),
        );
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {prefix}{msg} {elapsed}")
                .expect("valid template"),
        );
        b.enable_steady_tick(Duration::from_millis(250));
        b
    });
    let mut measure = |spec: &Spec| -> anyhow::Result<Run> {
        let target = spec.target()?;
        let addr = target.probe(spec.timeout())?;
        let job = pipeline::Job {
            spec,
            target: &target,
            addr,
            body: &body,
            watch: a.load.watch(addr),
            remote: remote.as_ref(),
            start_at: None,
            probe: pipeline::Probing::Off,
        };
        pipeline::measure_repeated(
            &job,
            a.repeat,
            a.pause,
            stop.flag.clone(),
            &mut Silent,
            &mut |_| {},
        )
    };
    let stopped = || stop.flag.load(Ordering::Relaxed);
    let sweep = if let Some(slo) = &a.slo {
        let mut objectives = slo.clone();
        objectives.0.extend(a.errors.clone());
        let search = Search {
            objectives: &objectives,
            slo_text: slo.text(),
            errors_text: a
                .errors
                .as_ref()
                .map(|o| o.text.trim_start_matches("errors").to_string()),
            budget: a.budget,
            pause: a.pause,
        };
        let mut each = |what: &str| {
            if let Some(b) = &bar {
                b.set_message(format!("ceiling search: {what}"));
            }
        };
        let (cells, c) = ceiling::search(&base, &search, &mut measure, &mut each, &stopped)?;
        Sweep {
            schema_version: SWEEP_SCHEMA_VERSION,
            tool: format!("loadlens {}", env!("CARGO_PKG_VERSION")),
            dims: Vec::new(),
            interrupted: c.stopped == "interrupted",
            cells,
            ceiling: Some(c),
        }
    } else {
        // A replay's cell lasts its log's span at its speed (at most -d).
        let replay_s = base.mix.as_ref().and_then(|m| {
            let r = m.replay.as_ref()?;
            Some(r.span_s / r.speed?)
        });
        let load_s = match (duration, replay_s) {
            (Some(d), Some(r)) => d.as_secs_f64().min(r),
            (Some(d), None) => d.as_secs_f64(),
            (None, r) => r.unwrap_or(0.0),
        };
        let cell_s = (load_s + a.pause.as_secs_f64()) * a.repeat.max(1) as f64;
        let mut each = |k: usize, n: usize, p: &crate::sweep::Planned| {
            if let Some(b) = &bar {
                let left = (n - k) as f64 * cell_s;
                b.set_prefix(format!("cell {} of {n} ", k + 1));
                b.set_message(format!(
                    "[{}] about {:.0}s left, elapsed",
                    p.coords.join(" "),
                    left.max(0.0)
                ));
            }
        };
        run_grid(&grid, &base, &mut measure, &mut each, &stopped)?
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    report::write_all(&sweep, &outputs)?;
    Ok(stop.exit_code())
}

/// The views asked for, each checked writable before any load; the text goes to
/// stdout unless `-q` or another view took stdout.
fn outputs(a: &SweepArgs) -> anyhow::Result<Vec<Output<Sweep>>> {
    let json = a.json.as_deref().map(Dest::parse);
    let csv = a.csv.as_deref().map(Dest::parse);
    if let Some(d) = &json {
        d.check("JSON")?;
    }
    if let Some(d) = &csv {
        d.check("CSV")?;
    }
    let text = !a.quiet && json != Some(Dest::Stdout) && csv != Some(Dest::Stdout);
    let mut out: Vec<Output<Sweep>> = Vec::new();
    out.extend(json.map(|d| Output::new(Json, d)));
    out.extend(csv.map(|d| Output::new(SweepCsv, d)));
    out.extend(crate::report::html_output(a.html.as_deref())?);
    if text {
        out.push(Output::new(SweepText, Dest::Stdout));
    }
    Ok(out)
}
