//! `loadlens tune`: the loop of the published investigations, run by loadlens. A
//! baseline load, its diagnosis, one typed change from the top finding (`change.rs`)
//! shown as a diff; with `apply`, the change written, tested by the server's own config
//! test, reloaded gracefully (`live.rs`), then proved by interleaved A/B pairs under the
//! same load (old, new, old, new …, reloading between) and kept only when the interval
//! of the per-pair relative gain is above `min_gain` and the spread did not blow up;
//! otherwise the old files are written back byte for byte, tested and reloaded.
//!
//! Why pairs and an interval: under noise, tuners keep changes that do not hold (TUNA,
//! 2025: 63% of the configurations chosen as best lose ≥ 30% when deployed again);
//! interleaving cancels drift, the interval says how sure, the spread check catches a
//! change that makes the server erratic (spinnaker#6278). One change is live at a time,
//! and any failure or signal restores the last good config (TuneD's and OtterTune's
//! outages: shared/reading/peers-and-techniques.md, "Tuning").

pub mod change;
mod gain;
pub mod live;
pub mod remote;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};

use crate::engine::Progress;
use crate::pipeline::{self, Job};
use crate::run::{
    Decision, Kind, LoadResults, LoadSummary, Run, Settle, TuneEdit, TunePair, TuneSession,
    TuneStep,
};
use crate::slo::{Objective as Slo, Op};
use change::{Ask, Change, Plan, Target};
use gain::{gain_of, log_gain, pct, spread_ok};

/// What a load is judged by.
#[derive(Debug, Clone)]
pub enum Objective {
    /// 2xx/3xx responses per second (the default).
    Throughput,
    /// Responses per second, whatever their status.
    Rps,
    /// A metric of `--slo`'s grammar; `p99` alone is `p99` lower-is-better.
    Slo(Slo),
}

impl Objective {
    pub fn parse(s: &str) -> anyhow::Result<Objective> {
        Ok(match s {
            "throughput" => Objective::Throughput,
            "rps" => Objective::Rps,
            _ if s.starts_with('p') && !s.contains(['<', '>']) => {
                Objective::Slo(Slo::parse(&format!("{s}<3600s")).with_context(|| {
                    format!("--objective {s}: give throughput, rps, a percentile (p99) or an objective such as 'p99<200ms'")
                })?)
            }
            _ => Objective::Slo(Slo::parse(s).context("--objective")?),
        })
    }

    pub fn name(&self) -> String {
        match self {
            Objective::Throughput => "throughput".into(),
            Objective::Rps => "rps".into(),
            Objective::Slo(o) if o.text.ends_with("<3600s") => o.label(),
            Objective::Slo(o) => o.text.clone(),
        }
    }

    pub fn higher_is_better(&self) -> bool {
        match self {
            Objective::Slo(o) => matches!(o.op, Op::Gt | Op::Ge),
            _ => true,
        }
    }

    pub fn measure(&self, r: &LoadResults) -> f64 {
        match self {
            Objective::Throughput => {
                r.responses.saturating_sub(r.non_2xx_3xx) as f64 / r.duration_s.max(1e-9)
            }
            Objective::Rps => r.requests_per_s,
            Objective::Slo(o) => o.measure(r).unwrap_or(f64::NAN),
        }
    }

    pub fn unit(&self) -> &'static str {
        match self {
            Objective::Slo(o) if o.is_latency() => "µs",
            Objective::Slo(_) => "",
            _ => "responses/s",
        }
    }
}

/// How to tune.
pub struct Options {
    pub apply: bool,
    pub pairs: u32,
    pub steps: u32,
    pub objective: Objective,
    pub min_gain_pct: f64,
    pub allow_sysctl: bool,
    /// `--try 'directive value'`: this change instead of the diagnosis's.
    pub try_change: Option<(String, String)>,
    /// Baseline repetitions (`--repeat`).
    pub repeat: u32,
    /// Pause before each load (`--pause`).
    pub pause: std::time::Duration,
    /// Where the server runs: this machine, or the other end of `--watch ssh://`.
    pub host: Arc<dyn live::Host>,
}

/// How a session ended.
pub enum Outcome {
    /// Ran its course (each step kept or reverted, or a dry run).
    Done,
    /// A step failed; its change was put back.
    Failed(String),
    /// A signal ended it; the live change was put back.
    Interrupted,
}

/// Where the session says what it does (the terminal, as it goes).
pub type Say<'a> = &'a mut dyn FnMut(String);

/// Runs a tune session from `job` (a watched load). Returns the baseline Run with the
/// session in `tune`, and how it ended.
pub fn tune(
    job: &Job,
    opts: &Options,
    stop: Arc<AtomicBool>,
    progress: &mut dyn Progress,
    say: Say,
) -> anyhow::Result<(Run, Outcome)> {
    say(format!(
        "baseline: {} load{} of the URL, watched",
        opts.repeat,
        if opts.repeat == 1 { "" } else { "s" }
    ));
    let mut run = pipeline::measure_repeated(
        job,
        opts.repeat,
        opts.pause,
        stop.clone(),
        progress,
        &mut |_| {},
    )?;
    let mut session = TuneSession {
        objective: opts.objective.name(),
        higher_is_better: opts.objective.higher_is_better(),
        applied: opts.apply,
        pairs: opts.pairs,
        min_gain_pct: opts.min_gain_pct,
        baseline: summary(&opts.objective, &run.results),
        steps: Vec::new(),
        restore_commands: Vec::new(),
        interrupted: None,
    };
    let mut outcome = Outcome::Done;
    let mut tried: BTreeSet<String> = BTreeSet::new();
    let mut diagnosed = run.clone();
    for step in 0..opts.steps.max(1) {
        if stop.load(Ordering::Relaxed) {
            outcome = Outcome::Interrupted;
            break;
        }
        let plan = if let (0, Some((d, v))) = (step, &opts.try_change) {
            change::tried(&diagnosed, d, v, &ask(opts))?
        } else {
            next_plan(&diagnosed, &tried, opts, say)?
        };
        let c = match plan {
            Plan::Change(c) => c,
            Plan::Nothing(why) => {
                say(why);
                break;
            }
        };
        tried.insert(c.finding.clone());
        let diff = c.diff();
        say(format!(
            "step {}: {} — {}\n{}",
            step + 1,
            c.finding,
            c.reason,
            diff
        ));
        let mut st = TuneStep {
            finding: c.finding.clone(),
            reason: c.reason.clone(),
            evidence: c.evidence.clone(),
            edits: c.edits.clone(),
            diff,
            pairs: Vec::new(),
            gain: None,
            decision: Decision::DryRun,
            why: String::new(),
        };
        if !opts.apply {
            st.why = format!(
                "dry run: nothing written; --apply would test it with {} pairs of this load (old, new, …), each {}",
                opts.pairs,
                load_words(job)
            );
            say(st.why.clone());
            session.steps.push(st);
            break;
        }
        for (path, (t, _, _)) in &c.files {
            opts.host.hold(t.server, t.pid, path)?;
        }
        let (decision, why) = prove(job, opts, &c, &mut st, &stop, progress, say, &mut session);
        st.decision = decision;
        st.why = why.clone();
        say(format!("step {}: {why}", step + 1));
        session.steps.push(st);
        match decision {
            Decision::Kept => {}
            Decision::Failed => {
                outcome = Outcome::Failed(why);
                break;
            }
            Decision::Interrupted => {
                outcome = Outcome::Interrupted;
                break;
            }
            _ => {}
        }
        if step + 1 < opts.steps {
            say("diagnosis again, on the config as it is now".into());
            diagnosed = pipeline::measure(job, stop.clone(), progress)?;
        }
    }
    match opts.host.release() {
        Ok(notes) => notes.into_iter().for_each(&mut *say),
        Err(e) => say(format!("could not release the config files' locks: {e:#}")),
    }
    run.tune = Some(session);
    Ok((run, outcome))
}

/// The first finding that has a typed change (and was not tried yet): bottlenecks
/// first, then the rest in their rank (a server whose CPU is used up may be ranked below
/// the wait for a CPU another process caused); the bottlenecks passed over are said.
/// None at all: nothing to do.
fn next_plan(
    run: &Run,
    tried: &BTreeSet<String>,
    opts: &Options,
    say: Say,
) -> anyhow::Result<Plan> {
    let ask = ask(opts);
    let mut skipped: Vec<String> = Vec::new();
    let ranked = run
        .findings
        .iter()
        .filter(|f| f.kind == Kind::Bottleneck)
        .chain(run.findings.iter().filter(|f| f.kind != Kind::Bottleneck));
    for f in ranked {
        if tried.contains(&f.id) {
            continue;
        }
        match change::plan(run, f, &ask)? {
            Plan::Change(c) => {
                for why in skipped {
                    say(why);
                }
                return Ok(Plan::Change(c));
            }
            Plan::Nothing(why) if f.kind == Kind::Bottleneck => skipped.push(why),
            Plan::Nothing(_) => {}
        }
    }
    Ok(Plan::Nothing(skipped.into_iter().next().unwrap_or_else(
        || "no bottleneck found: nothing to tune".to_string(),
    )))
}

fn ask(opts: &Options) -> Ask {
    Ask {
        allow_sysctl: opts.allow_sysctl,
        host: opts.host.clone(),
    }
}

fn load_words(job: &Job) -> String {
    let s = job.spec;
    let d = s
        .duration_s
        .map(|d| format!(" for {d} s"))
        .unwrap_or_default();
    format!("{} connections{d}", s.connections)
}

/// One load's numbers.
fn summary(o: &Objective, r: &LoadResults) -> LoadSummary {
    LoadSummary {
        objective: o.measure(r),
        requests_per_s: r.requests_per_s,
        good_per_s: r.responses.saturating_sub(r.non_2xx_3xx) as f64 / r.duration_s.max(1e-9),
        p99_us: r.latency.at(99.0).unwrap_or(0),
        errors: r.errors.total(),
        non_2xx_3xx: r.non_2xx_3xx,
        settled: Vec::new(),
    }
}

/// Which config is live.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Side {
    Old,
    New,
}

/// Makes `side` of change `c` live: sysctls (before a reload, so a listen() at the
/// reload sees them), files written, each tested, each server reloaded, settled and
/// serving. How each settled.
fn make_live(
    c: &Change,
    side: Side,
    url: &str,
    host: &dyn live::Host,
) -> anyhow::Result<Vec<Settle>> {
    for e in &c.edits {
        if let TuneEdit::Sysctl { pid, key, old, new } = e {
            let v = if side == Side::New { new } else { old };
            host.sysctl(*pid, key, Some(v))?;
        }
    }
    let mut reload: Vec<&Target> = Vec::new();
    for (path, (t, old, new)) in &c.files {
        let text = if side == Side::New { new } else { old };
        t.host.write(path, text)?;
        if !reload.iter().any(|r| r.pid == t.pid) {
            reload.push(t);
        }
    }
    for t in &reload {
        t.host.config_test(t.server, t.pid, &t.file)?;
    }
    let settled = reload
        .iter()
        .map(|t| t.host.reload(t.server, t.pid))
        .collect::<anyhow::Result<Vec<_>>>()?;
    live::serving(url)?;
    Ok(settled)
}

/// Says a server whose workers had not settled within the bound: the load goes on.
fn unsettled(s: &Settle) -> String {
    format!(
        "{} {}'s new workers ({}, {} threads) were still changing {:.1} s after its reload: measuring anyway",
        s.server.name(),
        s.pid,
        s.workers,
        s.threads,
        s.after_ms as f64 / 1000.0
    )
}

/// Puts the old side back after a failure or a signal: every file byte for byte, each
/// server reloaded, the sysctls; errors said, not returned (the first error is what the
/// user sees).
fn restore(c: &Change, url: &str, host: &dyn live::Host, say: Say) {
    match make_live(c, Side::Old, url, host) {
        Ok(_) => say("restored the original config; the server serves".into()),
        Err(e) => {
            // The files at least are back, whatever the reload did.
            for (path, (t, old, _)) in &c.files {
                let _ = t.host.write(path, old);
            }
            say(format!(
                "error while restoring: {e:#}: the files were written back; check the server"
            ));
        }
    }
}

/// The A/B pairs of one change and the decision, the old side live at the end unless
/// kept.
#[allow(clippy::too_many_arguments)]
fn prove(
    job: &Job,
    opts: &Options,
    c: &Change,
    st: &mut TuneStep,
    stop: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
    say: Say,
    session: &mut TuneSession,
) -> (Decision, String) {
    let url = job.spec.url.clone();
    // The pairs' loads are not watched nor probed: only their results are compared.
    let quiet = Job {
        watch: None,
        remote: None,
        start_at: None,
        probe: pipeline::Probing::Off,
        ..*job
    };
    // `None` until the first load: the old config is reloaded before it too, so every
    // load of both sides follows a reload.
    let mut live: Option<Side> = None;
    let mut run_side =
        |side: Side, pair: u32, live: &mut Option<Side>, say: Say| -> anyhow::Result<LoadSummary> {
            // Before the first pair, the baseline's leftovers (requests still queued at
            // an upstream when its clients gave up) get a load's length and a timeout
            // to drain: the first old load right after it measured 5 responses/s
            // against the old side's 14.5 in php-fpm-children.
            let pause = if live.is_none() {
                let d = quiet.spec.duration_s.unwrap_or(0.0) + quiet.spec.timeout_s;
                opts.pause
                    .max(std::time::Duration::from_secs_f64(d.min(30.0)))
            } else {
                opts.pause
            };
            let mut settled = Vec::new();
            if *live != Some(side) {
                settled = make_live(c, side, &url, &*opts.host)?;
                *live = Some(side);
                settled
                    .iter()
                    .filter(|s| !s.steady)
                    .for_each(|s| say(unsettled(s)));
            }
            // Queues and TIME_WAIT of the load before settle the same way for each side.
            let until = std::time::Instant::now() + pause;
            while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if stop.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            say(format!(
                "pair {pair} of {}: {} config",
                opts.pairs,
                if side == Side::Old { "old" } else { "new" }
            ));
            let r = pipeline::measure(&quiet, stop.clone(), progress)?;
            if stop.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            Ok(LoadSummary {
                settled,
                ..summary(&opts.objective, &r.results)
            })
        };
    let hib = opts.objective.higher_is_better();
    let mut failure = None;
    for i in 1..=opts.pairs {
        let pair = run_side(Side::Old, i, &mut live, &mut *say).and_then(|old| {
            let new = run_side(Side::New, i, &mut live, &mut *say)?;
            Ok((old, new))
        });
        match pair {
            Ok((old, new)) => {
                let g = pct(log_gain(old.objective, new.objective, hib));
                say(format!(
                    "pair {i} of {}: old {:.1}, new {:.1} {}: {g:+.1}%",
                    opts.pairs,
                    old.objective,
                    new.objective,
                    opts.objective.unit()
                ));
                st.pairs.push(TunePair {
                    old,
                    new,
                    gain_pct: g,
                });
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if let Some(e) = failure {
        let interrupted = stop.load(Ordering::Relaxed);
        // Whatever was live when it failed: a test may have failed with the new files
        // written, a signal may have come during a reload.
        restore(c, &url, &*opts.host, say);
        return if interrupted {
            (
                Decision::Interrupted,
                "interrupted: the original config was put back".into(),
            )
        } else {
            (
                Decision::Failed,
                format!("{e:#}; the original config was put back"),
            )
        };
    }
    let gain = gain_of(&st.pairs);
    let spread_ok = spread_ok(&gain, &st.pairs, opts.min_gain_pct);
    let significant = gain.low_pct > opts.min_gain_pct;
    st.gain = Some(gain.clone());
    let interval = format!(
        "gain {:+.1}% (95% interval {:+.1}% to {:+.1}%, {} pairs; spread old {:.1}%, new {:.1}%)",
        gain.mean_pct,
        gain.low_pct,
        gain.high_pct,
        gain.pairs,
        gain.spread_old_pct,
        gain.spread_new_pct
    );
    if significant && spread_ok {
        // A kept sysctl stays (the change needs it); how to put it back is printed
        // and recorded, as bpftune logs each change with its restore command.
        for e in &c.edits {
            if let TuneEdit::Sysctl { pid, key, old, .. } = e {
                session.restore_commands.push(format!(
                    "nsenter --net=/proc/{pid}/ns/net sysctl -w {key}={old}"
                ));
            }
        }
        return (Decision::Kept, format!("kept: {interval}"));
    }
    let why = if !significant {
        format!(
            "reverted: not a significant gain above {}%: {interval}",
            opts.min_gain_pct
        )
    } else {
        format!("reverted: the spread blew up: {interval}")
    };
    match make_live(c, Side::Old, &url, &*opts.host) {
        Ok(_) => (Decision::Reverted, why),
        Err(e) => {
            restore(c, &url, &*opts.host, say);
            (
                Decision::Failed,
                format!("{why}; putting it back failed: {e:#}"),
            )
        }
    }
}

/// The kept changes of a session as one patch (`--patch-out`).
pub fn patch(session: &TuneSession) -> String {
    session
        .steps
        .iter()
        .filter(|s| s.decision == Decision::Kept)
        .map(|s| s.diff.as_str())
        .collect()
}

/// The config files a session's changes touch.
pub fn files(session: &TuneSession) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for s in &session.steps {
        for e in &s.edits {
            if let TuneEdit::Directive { file, .. } = e {
                let p = PathBuf::from(file);
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}
