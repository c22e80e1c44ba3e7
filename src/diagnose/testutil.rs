//! Helpers for the rules' tests: recorded lab Runs (`tests/data/runs/`, written by
//! `loadlens lab run NAME --fix --json-dir tests/data/runs`) with one signal changed.

use hdrhistogram::Histogram;

use crate::run::{Role, Run};

/// A Run recorded from the lab, e.g. `listen-backlog-before`.
pub fn fixture(name: &str) -> Run {
    let p = format!("{}/tests/data/runs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    Run::from_json(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))).unwrap()
}

/// Whether the diagnosis of `run` has a finding `id` (of any kind). An id no rule
/// makes fails the test (a misspelt id would never fire, and `!fires` would pass).
pub fn fires(run: &Run, id: &str) -> bool {
    let id: super::FindingId = id.parse().unwrap_or_else(|e| panic!("{e}"));
    super::diagnose(run).iter().any(|f| f.id == id)
}

/// The healthy Run with these window counters set.
pub fn with_counters(kv: &[(&str, u64)]) -> Run {
    let mut run = fixture("healthy-before");
    let c = &mut run.evidence.as_mut().unwrap().window.counters;
    for (k, v) in kv {
        c.insert(k.to_string(), *v);
    }
    run
}

/// An empty latency histogram like the engine's (µs, up to 5 s, 3 significant figures).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 5_000_000, 3).unwrap()
}

/// `run` with a server log holding `count` lines of `class`, the example being the
/// first line of `tests/data/logs/FILE` containing `needle` (captured from the lab).
pub fn with_log(run: &mut Run, class: &str, count: u64, file: &str, needle: &str) {
    let p = format!("{}/tests/data/logs/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let example = text
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} not in {p}"))
        .to_string();
    let logs = &mut run.evidence.as_mut().unwrap().logs;
    if logs.is_empty() {
        logs.push(crate::run::ServerLog {
            path: format!("/var/log/{file}"),
            server: "nginx".into(),
            ..Default::default()
        });
    }
    logs[0].classes.push(crate::run::LogClass {
        class: class.into(),
        count,
        example,
    });
}

/// Puts the profile captured in the lab (`tests/data/profiles/NAME.json`) into `run`,
/// its samples attributed to the run's busiest front worker.
pub fn with_profile(run: &mut Run, name: &str) {
    let p = format!(
        "{}/tests/data/profiles/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut profile: crate::run::Profile =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let ev = run.evidence.as_mut().unwrap();
    let worker = ev
        .window
        .processes
        .iter()
        .filter(|p| p.role == Role::Worker && p.is_front())
        .max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))
        .expect("a front worker")
        .pid;
    for s in profile.stacks.iter_mut() {
        s.pid = worker;
    }
    ev.profile = Some(profile);
}

/// `run` with a recurring stall injected: as many requests as connections waited
/// `stall_us` at once in a later second (the evidence of `event-loop-stall`).
/// `n` more values of `us` in a latency summary (a mode).
pub fn with_mode(summary: &mut crate::run::LatencySummary, us: u64, n: u64) {
    let mut h = summary.decode().unwrap();
    h.record_n(us, n).unwrap();
    let corrected = summary.corrected_for_coordinated_omission;
    *summary = crate::run::LatencySummary::from_histogram(&h, corrected);
}

pub fn with_stall(run: &mut Run, stall_us: u64) {
    let mut h = run.results.latency.decode().unwrap();
    h.record_n(stall_us, run.spec.connections as u64).unwrap();
    let corrected = run.results.latency.corrected_for_coordinated_omission;
    run.results.latency = crate::run::LatencySummary::from_histogram(&h, corrected);
    if let Some(s) = run.results.timeline.iter_mut().find(|s| s.t_s >= 1) {
        s.max_us = stall_us;
    }
}

/// Asserts that finding `id` fired and was demoted to info, explained by `cause`.
pub fn assert_explained(found: &[crate::run::Finding], id: &str, cause: &str) {
    let f = found.iter().find(|f| f.id == id).expect("fires");
    let ids: Vec<_> = found.iter().map(|f| (f.id.as_str(), f.kind)).collect();
    assert_eq!(f.kind, crate::run::Kind::Info, "{ids:?}");
    assert!(f.explanation.contains(&format!("Explained by {cause}")));
    assert_eq!(f.because_of.as_deref(), Some(cause));
}
