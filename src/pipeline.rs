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

use crate::diagnose::FindingId;
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
    /// Whether short probes may run after the load when its evidence admits several
    /// causes (`--probe`, `--no-probe`).
    pub probe: Probing,
}

/// When probes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probing {
    /// Never (`--no-probe`; the default under `--slo`, `-n`, `-R`, a segment).
    Off,
    /// When one run's evidence admits several causes: the rate could be the load's
    /// concurrency or a limit inside the server (`concurrency-bound` found).
    WhenUnsure,
}

/// A probe's length as a share of the load's, and its bounds: short enough to cost
/// little (two probes add at most 30% and 6 s to a run), long enough for a few dozen
/// requests of 50 ms at 1 connection.
const PROBE_SHARE: f64 = 0.15;
const PROBE_MIN_S: f64 = 0.5;
const PROBE_MAX_S: f64 = 3.0;
/// The second probe's connections, as a multiple of the load's.
const PROBE_MORE: u32 = 4;

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
    let outcome = engine::run(
        job.spec,
        job.target,
        job.addr,
        job.body,
        stop.clone(),
        progress,
    );
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
        probes: Vec::new(),
        path: None,
        tune: None,
    };
    run.findings = crate::diagnose::diagnose(&run);
    if job.probe == Probing::WhenUnsure && !stop.load(Ordering::Relaxed) && unsure(&run) {
        run.probes = probes(job, run.results.latency.mean_us / 1e6, &stop, progress)?;
        run.findings = crate::diagnose::diagnose(&run);
    }
    run.path = crate::diagnose::request_path(&run);
    Ok(run)
}

/// Whether one run's evidence admits several causes: the rate could be the load's
/// concurrency or a limit inside the server (`concurrency-bound` found, not beneath
/// another bottleneck), or a closed
/// loop found no bottleneck at all (a pool's queue inside a process shows in no
/// counter; a load shorter than a few latencies misses Little's law).
fn unsure(run: &Run) -> bool {
    let closed = !run.spec.open_loop() && run.results.responses > 0;
    // Findings that explain a latency (a wait for a CPU, a stall) but not a rate that
    // stays put (their rows' `latency_only`): beside them the latency could still be a
    // queue for a pool.
    let latency_only =
        |f: &crate::run::Finding| FindingId::of(f).is_some_and(|id| id.row().latency_only);
    // `concurrency-bound` beneath another bottleneck (info: a stall, a saturated tier
    // held the requests) is that bottleneck's arithmetic, not a question: probing a
    // stalled server would read its stall as a pool.
    run.findings
        .iter()
        .any(|f| f.id == FindingId::ConcurrencyBound && f.kind != crate::run::Kind::Info)
        || (closed
            && run.evidence.is_some()
            && !run
                .findings
                .iter()
                .any(|f| f.kind == crate::run::Kind::Bottleneck && !latency_only(f)))
}

/// Short loads after the main one (not watched): at 1 connection (the unloaded service
/// time) and at [`PROBE_MORE`] × the connections (does the rate grow?). Each runs
/// [`PROBE_SHARE`] of the load's length within its bounds.
fn probes(
    job: &Job,
    latency_s: f64,
    stop: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> anyhow::Result<Vec<crate::run::Probe>> {
    // The requests the load left in flight are still queued in the server (a pool's
    // queue runs them after their clients have gone): the probe waits for them, two of
    // the load's latencies, or its first requests would wait behind them.
    let drain = Instant::now() + Duration::from_secs_f64((2.0 * latency_s).min(PROBE_MAX_S));
    while Instant::now() < drain && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Long enough for a few requests at 1 connection: three of the load's latencies
    // (which bound the unloaded one), within the bounds.
    let d = job.spec.duration_s.unwrap_or(PROBE_MIN_S / PROBE_SHARE);
    let secs = (d * PROBE_SHARE)
        .max(3.0 * latency_s)
        .clamp(PROBE_MIN_S, PROBE_MAX_S);
    let more = job.spec.connections.saturating_mul(PROBE_MORE).max(2);
    let mut out = Vec::new();
    for (i, c) in [1, more].into_iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut spec = job.spec.clone();
        spec.connections = c;
        spec.threads = spec.threads.min(c).max(1);
        spec.duration_s = Some(secs);
        spec.requests = None;
        progress.phase(&format!(
            "probe {} of 2: {c} connections, {secs:.1}s",
            i + 1
        ));
        let o = engine::run(
            &spec,
            job.target,
            job.addr,
            job.body,
            stop.clone(),
            progress,
        );
        progress.phase("");
        let r = o?.results;
        out.push(crate::run::Probe {
            connections: c,
            duration_s: r.duration_s,
            responses: r.responses,
            failed: r.errors.total() + r.non_2xx_3xx,
            requests_per_s: r.requests_per_s,
            mean_ms: r.latency.mean_us / 1e3,
            p50_ms: r.latency.at(50.0).unwrap_or(0) as f64 / 1e3,
            ttfb_ms: r.phases.as_ref().map(|p| p.ttfb.mean_us / 1e3),
        });
    }
    Ok(out)
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
