//! One load, measured and diagnosed: the watch starts (discovery, the `before`
//! snapshot), the engine drives the load, the watch takes its `after` snapshot, and the
//! Run they fill is diagnosed. Nothing here prints: the caller chooses the views.
//!
//! The command line, and later repeats, sweeps and segments, all run loads through
//! [`measure`], so every Run is made the same way.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::engine::{self, Progress};
use crate::remote::{Session, Watching};
use crate::run::{Evidence, LoadResults, Repetition, Run, SCHEMA_VERSION};
use crate::spec::{Spec, Target};
use crate::watch::{Watch, WatchSpec};

/// A load to run: what was asked, validated, with its target resolved and probed.
pub struct Job<'a> {
    pub spec: &'a Spec,
    pub target: &'a Target,
    /// The address that accepted the probe.
    pub addr: SocketAddr,
    pub body: &'a [u8],
    /// How to watch the machine; `None` = `--no-watch`.
    pub watch: Option<WatchSpec>,
    /// `--watch ssh://…`: the watch runs on the server's machine, through this
    /// session, instead of on this one.
    pub remote: Option<&'a Session>,
    /// `--start-at`: the first request is due at this time (seconds since the Unix
    /// epoch), so segments on several machines start together.
    pub start_at: Option<f64>,
}

/// Runs the load with the watch around it and returns the diagnosed Run. `stop` ends
/// the load early (Ctrl-C); the Run still holds what was measured.
pub fn measure(
    job: &Job,
    stop: Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> anyhow::Result<Run> {
    // The watch's discovery takes a moment: it starts a second before an agreed start,
    // so the load begins on time and the watch window is at most that much longer.
    if let Some(at) = job.start_at {
        wait_until(at - WATCH_LEAD_S, &stop);
    }
    let mut unwatched = None;
    let watch = match (&job.watch, job.remote) {
        // A channel lost in an earlier load (`--repeat`, a sweep's cells): the loads go
        // on without the server's evidence, saying so.
        (Some(_), Some(session)) if session.lost() => {
            unwatched = Some(format!(
                "the remote watch on {} was lost in an earlier load: this one was not watched",
                session.hostname()
            ));
            None
        }
        (Some(spec), Some(session)) => Some(Around::There(session, session.start(spec)?)),
        (Some(spec), None) => Some(Around::Here(Watch::start(spec.clone()))),
        (None, _) => None,
    };
    if let Some(at) = job.start_at {
        wait_until(at, &stop);
    }
    let started_unix_s = unix_now();
    let outcome = engine::run(job.spec, job.target, job.addr, job.body, stop, progress);
    // The watch ends even when the load failed, so its thread never outlives the run.
    let (evidence, lost) = match watch.map(|w| w.finish(started_unix_s)) {
        Some((e, lost)) => (Some(e), lost),
        None => (None, unwatched),
    };
    let outcome = outcome?;
    let mut run = Run {
        schema_version: SCHEMA_VERSION,
        tool: format!("loadlens {}", env!("CARGO_PKG_VERSION")),
        started_unix_s,
        spec: job.spec.clone(),
        target_addr: job.addr.to_string(),
        results: outcome.results,
        client: outcome.client,
        evidence,
        warnings: lost.into_iter().collect(),
        findings: Vec::new(),
        repetitions: Vec::new(),
        interrupted: None,
        segment: None,
        merged: None,
        objectives: Vec::new(),
        trust: None,
        tune: None,
    };
    run.findings = crate::diagnose::diagnose(&run);
    Ok(run)
}

/// The watch around one load: on this machine, or on the server's over a session.
enum Around<'a> {
    Here(Watch),
    There(&'a Session, Watching),
}

impl Around<'_> {
    /// The evidence, its samples at the load's start (`started_unix_s`), and a warning
    /// for the Run when the remote watch was lost during the load (the evidence is then
    /// what came before).
    fn finish(self, started_unix_s: f64) -> (Evidence, Option<String>) {
        match self {
            Around::Here(w) => (w.finish(), None),
            Around::There(session, w) => {
                let ev = session.finish(w, started_unix_s);
                let lost = ev.source.as_ref().and_then(|s| s.lost_at_s).map(|at| {
                    format!(
                        "the remote watch on {} was lost {at:.1} s into the load: the findings rest on the server's samples before then; its kernel counters, error logs and profile were not seen",
                        session.hostname()
                    )
                });
                (ev, lost)
            }
        }
    }
}

/// How long before an agreed start (`--start-at`) the watch starts.
pub const WATCH_LEAD_S: f64 = 1.0;

/// Now, in seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Sleeps until `at` (seconds since the Unix epoch) on the wall clock, or until `stop`.
/// Short sleeps near the end keep the start within about a millisecond of `at`.
pub fn wait_until(at: f64, stop: &AtomicBool) {
    loop {
        let left = at - unix_now();
        if left <= 0.0 || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(Duration::from_secs_f64(left.min(0.05)));
    }
}

/// Runs the same load `times` times, `pause` apart, and returns one Run holding every
/// repetition (see [`Run::repetitions`]). A stop (Ctrl-C) ends the current repetition
/// and skips the rest. `each` is called before each repetition with its index.
pub fn measure_repeated(
    job: &Job,
    times: u32,
    pause: Duration,
    stop: Arc<AtomicBool>,
    progress: &mut dyn Progress,
    each: &mut dyn FnMut(u32),
) -> anyhow::Result<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for i in 0..times.max(1) {
        if i > 0 {
            // Let TIME_WAIT, queues and caches settle the same way before each one.
            let until = Instant::now() + pause;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50).min(pause));
            }
        }
        if i > 0 && stop.load(Ordering::Relaxed) {
            break;
        }
        each(i);
        runs.push(measure(job, stop.clone(), progress)?);
    }
    if runs.len() == 1 && times <= 1 {
        return Ok(runs.remove(0));
    }
    let results = LoadResults::concat(&runs.iter().map(|r| &r.results).collect::<Vec<_>>())?
        .expect("at least one repetition ran");
    let findings = crate::diagnose::combine(
        &runs
            .iter()
            .map(|r| r.findings.as_slice())
            .collect::<Vec<_>>(),
    );
    let last = runs.last().expect("at least one repetition ran");
    Ok(Run {
        results,
        client: last.client.clone(),
        evidence: last.evidence.clone(),
        findings,
        repetitions: runs
            .iter()
            .map(|r| Repetition {
                started_unix_s: r.started_unix_s,
                results: r.results.clone(),
                client: r.client.clone(),
                evidence: r.evidence.clone(),
                findings: r.findings.clone(),
            })
            .collect(),
        ..runs[0].clone()
    })
}
