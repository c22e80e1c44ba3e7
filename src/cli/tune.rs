//! `loadlens tune URL [run's flags]`: the baseline, the diagnosis, a typed change as a
//! diff; with `--apply`, the change tested by A/B pairs, kept or put back.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::parse_u32;
use super::run::{prepare, RunArgs};
use crate::engine::Silent;
use crate::pipeline;
use crate::report::{self, Dest, Json, Output, Text};
use crate::run::Run;
use crate::tune::{self, Objective, Options, Outcome};

#[derive(Args, Debug)]
pub struct TuneArgs {
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Write the change, test and reload the server, prove it by A/B pairs, keep it or
    /// put it back (without it: a dry run that writes nothing).
    #[arg(long)]
    pub(super) apply: bool,
    /// A/B pairs per change (old, new, …), at least 5.
    #[arg(long, value_parser = parse_u32, default_value = "5", value_name = "N")]
    pub(super) pairs: u32,
    /// Changes to try, one after the other, each from the diagnosis of the config as it
    /// is then.
    #[arg(long, value_parser = parse_u32, default_value = "1", value_name = "N")]
    pub(super) steps: u32,
    /// What a load is judged by: throughput (2xx/3xx responses per second), rps, p99
    /// (lower is better), or an objective such as 'p99<200ms'.
    #[arg(long, default_value = "throughput")]
    pub(super) objective: String,
    /// The smallest gain kept, percent: the 95% interval's lower end must be above it.
    #[arg(long, default_value = "2", value_name = "PERCENT")]
    pub(super) min_gain: f64,
    /// Allow changing sysctls (in the server's network namespace) when a change needs
    /// one; a kept one stays, and how to put it back is printed.
    #[arg(long)]
    pub(super) allow_sysctl: bool,
    /// Try this change instead of the diagnosis's, e.g. 'proxy_buffers 8 64k' (a
    /// directive already written in the server's config).
    #[arg(long = "try", value_name = "'DIRECTIVE VALUE'")]
    pub(super) try_change: Option<String>,
    /// Write the kept changes as one patch (unified diff) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(super) patch_out: Option<PathBuf>,
}

/// Ctrl-C and SIGTERM raise the flag and are remembered; unlike `run`, a second signal
/// does not kill: the config must be put back first.
fn signals() -> anyhow::Result<(Arc<AtomicBool>, Arc<AtomicUsize>)> {
    let flag = Arc::new(AtomicBool::new(false));
    let which = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, which.clone(), sig as usize)?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok((flag, which))
}

pub fn cmd(mut a: TuneArgs) -> anyhow::Result<ExitCode> {
    let r = &a.run;
    if r.ray.address.is_some() || r.segment.is_some() || r.start_at.is_some() {
        anyhow::bail!(
            "tune runs its loads from this machine: drop --ray, --segment and --start-at"
        );
    }
    if r.load.no_watch {
        anyhow::bail!("tune diagnoses the server it changes: drop --no-watch");
    }
    if a.pairs < 5 {
        anyhow::bail!(
            "--pairs {}: at least 5 pairs are needed to judge a change against noise",
            a.pairs
        );
    }
    if !(0.0..1000.0).contains(&a.min_gain) {
        anyhow::bail!("--min-gain {}: give a percent from 0 to 1000", a.min_gain);
    }
    let objective = Objective::parse(&a.objective)?;
    let try_change = match &a.try_change {
        Some(t) => match t.trim().split_once(char::is_whitespace) {
            Some((d, v)) if !v.trim().is_empty() => Some((d.to_string(), v.trim().to_string())),
            _ => anyhow::bail!(
                "--try '{t}': give a directive and its value, e.g. --try 'gzip_comp_level 5'"
            ),
        },
        None => None,
    };
    let (body, spec) = prepare(&mut a.run)?;
    // --save: an unwritable --db fails here, before any load.
    let saver = a.run.save.open()?;
    let target = spec.target()?;
    let addr = target.probe(spec.timeout())?;
    let json = a.run.json.as_deref().map(Dest::parse);
    if let Some(d) = &json {
        d.check("JSON")?;
    }
    if let Some(p) = &a.patch_out {
        Dest::File(p.clone()).check("patch")?;
    }
    let text = !a.run.quiet && json != Some(Dest::Stdout);
    let mut outputs: Vec<Output<Run>> = Vec::new();
    outputs.extend(json.map(|d| Output::new(Json, d)));
    // The page of the baseline Run, the session told on it as a story.
    outputs.extend(report::html_output(a.run.html.as_deref())?);
    if text {
        outputs.push(Output::new(
            Text {
                latency: a.run.latency,
            },
            Dest::Stdout,
        ));
    }
    // With --watch ssh://, the server's config is read, changed, tested and reloaded on
    // its machine through the watch's session (kept open through a signal: ssh has a
    // process group of its own, so the config can be put back over it).
    let loads = a.run.repeat.max(1) + a.steps.max(1) * (2 * a.pairs + 1);
    let guard = match spec.duration_s {
        Some(d) => {
            Duration::from_secs_f64(d + spec.timeout_s.min(30.0) + 1.0) * loads
                + a.run.pause * loads
                + Duration::from_secs(600)
        }
        None => Duration::from_secs(6 * 3600),
    };
    let session = a.run.load.remote(guard, !text)?.map(Arc::new);
    let host: Arc<dyn tune::live::Host> = match &session {
        Some(s) => Arc::new(tune::remote::Remote { session: s.clone() }),
        None => Arc::new(tune::live::Local::default()),
    };
    let (stop, which) = signals()?;
    let job = pipeline::Job {
        spec: &spec,
        target: &target,
        addr,
        body: &body,
        watch: a.run.load.watch(addr),
        remote: session.as_deref(),
        start_at: None,
        // The baseline's diagnosis probes as `run` does when its evidence admits several
        // causes (a pool's queue and the load's own concurrency look alike without a
        // probe); the A/B pairs never do (`tune::prove`): they must be the same load.
        probe: super::run::probing(&a.run, &spec),
    };
    let opts = Options {
        apply: a.apply,
        pairs: a.pairs,
        steps: a.steps.max(1),
        objective,
        min_gain_pct: a.min_gain,
        allow_sysctl: a.allow_sysctl,
        try_change,
        repeat: a.run.repeat.max(1),
        pause: a.run.pause,
        host,
    };
    let mut say = |line: String| {
        let mut e = std::io::stderr().lock();
        for l in line.trim_end().lines() {
            let _ = writeln!(e, "tune: {l}");
        }
    };
    let (mut run, outcome) = tune::tune(&job, &opts, stop.clone(), &mut Silent, &mut say)?;
    let signal = match which.load(Ordering::Relaxed) as i32 {
        0 => None,
        signal_hook::consts::SIGTERM => Some("SIGTERM"),
        _ => Some("SIGINT"),
    };
    if let Some(s) = run.tune.as_mut() {
        s.interrupted = signal.map(String::from);
    }
    run.interrupted = signal.map(String::from);
    report::write_all(&run, &outputs)?;
    // The baseline Run (with the session in it) goes into the history.
    if let Some(s) = &saver {
        s.save(&run)?;
    }
    let session = run.tune.as_ref().expect("tune sets its session");
    if text {
        let mut out = std::io::stdout().lock();
        out.write_all(report::tune::render(session).as_bytes())?;
        out.flush()?;
    }
    if let Some(p) = &a.patch_out {
        let patch = tune::patch(session);
        if patch.is_empty() {
            eprintln!("tune: no change kept: {} not written", p.display());
        } else {
            std::fs::write(p, patch)
                .map_err(|e| anyhow::anyhow!("cannot write --patch-out {}: {e}", p.display()))?;
        }
    }
    match outcome {
        Outcome::Done => Ok(ExitCode::SUCCESS),
        Outcome::Failed(why) => {
            eprintln!("error: {why}");
            Ok(ExitCode::from(2))
        }
        Outcome::Interrupted => Ok(ExitCode::from(128 + which.load(Ordering::Relaxed) as u8)),
    }
}
