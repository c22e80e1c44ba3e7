//! Compare Runs: the numbers that matter side by side, each later Run against the
//! first, with the change and a verdict from a test that fits the data.
//!
//! The test is Welch's t-test (unequal variances) at p < 0.05, on
//! - the per-repetition values when both Runs have at least two repetitions
//!   (`loadlens run --repeat N`): independent samples, the sound case;
//! - otherwise the per-second values of each Run (requests/s, p50, p99, errors from the
//!   timeline; the watch's per-sample rates), with each series counted at its effective
//!   size n·(1−r)/(1+r) for its lag-1 autocorrelation r, because neighbouring seconds of
//!   one run are not independent. Seconds of one run say nothing about run-to-run
//!   variation (a different CPU placement, a cold cache): the method text says so.
//!
//! Numbers with neither (p90, p99.9, max of a single run) are *not enough data*.

use crate::run::Counter;
use crate::run::{
    Change, CompareRow, ComparedRun, Comparison, Evidence, Kind, LoadMetric, LoadResults,
    ProcRates, Role, Run, Sample, Verdict, COMPARISON_SCHEMA_VERSION, LOAD_METRICS,
};
use crate::stats::{effective_n, mean_sd, welch_p};

/// Significance level of every verdict.
pub const ALPHA: f64 = 0.05;
/// Evidence rows shown: the ones that moved most.
const EVIDENCE_ROWS: usize = 6;

/// The method, as shown under the table and in `loadlens compare --help`.
pub const METHOD: &str = "Each run is compared with the first. Verdict: Welch's t-test, p < 0.05, on the repetitions when both runs have at least 2 (`loadlens run --repeat N`); otherwise on the runs' per-second values, each series counted at its effective size n(1-r)/(1+r) for its lag-1 autocorrelation r. Per-second values cannot see run-to-run variation: for a verdict that can, repeat the runs.";

/// An evidence number: over the window, and per sample.
struct EvidenceMetric {
    name: &'static str,
    unit: &'static str,
    /// Smaller moves are not worth a row (TIME_WAIT 1 → 2 is not news).
    min_change: f64,
    window: fn(&Evidence) -> Option<f64>,
    per_sample: fn(&Sample) -> Option<f64>,
}

fn busiest<'a>(
    procs: impl Iterator<Item = &'a ProcRates>,
    f: fn(&ProcRates) -> Option<f64>,
) -> Option<f64> {
    procs
        .filter(|p| p.role == Role::Worker && p.is_front())
        .filter_map(f)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
}

/// A counter's rate over the window (from the window delta) and per sample.
macro_rules! counter_metric {
    ($name:expr, $key:expr) => {
        EvidenceMetric {
            name: $name,
            unit: "/s",
            min_change: 1.0,
            window: |e| {
                let d = e.window.duration_s.max(1e-9);
                Some(e.window.counters.get($key.key()).copied().unwrap_or(0) as f64 / d)
            },
            per_sample: |s| Some(s.tcp_per_s.get($key.key()).copied().unwrap_or(0.0)),
        }
    };
}

/// A number of the busiest server worker, over the window and per sample.
macro_rules! worker_metric {
    ($name:expr, $unit:expr, $min:expr, $f:expr) => {
        EvidenceMetric {
            name: $name,
            unit: $unit,
            min_change: $min,
            window: |e| busiest(e.window.processes.iter(), $f),
            per_sample: |s| busiest(s.processes.iter(), $f),
        }
    };
}

const EVIDENCE: &[EvidenceMetric] = &[
    EvidenceMetric {
        name: "TIME_WAIT max",
        unit: "sockets",
        min_change: 10.0,
        window: |e| Some(e.window.time_wait_max as f64),
        per_sample: |s| s.sockstat.get("TCP.tw").map(|v| *v as f64),
    },
    counter_metric!("ListenOverflows", Counter::ListenOverflows),
    counter_metric!("retransmits", Counter::RetransSegs),
    counter_metric!("connections opened", Counter::ActiveOpens),
    counter_metric!("connections accepted", Counter::PassiveOpens),
    worker_metric!("worker CPU (busiest)", "%", 5.0, |p| Some(p.cpu_pct)),
    worker_metric!("worker run delay (busiest)", "ms/s", 5.0, |p| p
        .run_delay_ms_per_s),
    worker_metric!("worker bytes per read", "bytes", 64.0, |p| p.bytes_per_read),
    worker_metric!("worker bytes per write", "bytes", 64.0, |p| p
        .bytes_per_write),
    EvidenceMetric {
        name: "accept queue max",
        unit: "connections",
        min_change: 5.0,
        window: |e| {
            e.window
                .listen_queues
                .iter()
                .map(|q| q.max_queue as f64)
                .reduce(f64::max)
        },
        per_sample: |s| {
            s.listen_queues
                .iter()
                .map(|q| q.queue as f64)
                .reduce(f64::max)
        },
    },
];

/// The samples of one number in one Run for a test: per repetition when there are
/// several, else per second.
struct Samples {
    xs: Vec<f64>,
    repetitions: bool,
}

impl Samples {
    fn side(&self) -> (f64, f64, f64) {
        let (m, sd) = mean_sd(&self.xs);
        let n = if self.repetitions {
            self.xs.len() as f64
        } else {
            effective_n(&self.xs)
        };
        (m, sd, n)
    }
}

fn repetitions_of(run: &Run) -> Vec<&LoadResults> {
    run.repetitions.iter().map(|r| &r.results).collect()
}

fn load_samples(run: &Run, m: &LoadMetric, use_reps: bool) -> Samples {
    if use_reps {
        Samples {
            xs: repetitions_of(run)
                .into_iter()
                .filter_map(m.value)
                .collect(),
            repetitions: true,
        }
    } else {
        Samples {
            xs: (m.per_second)(&run.results),
            repetitions: false,
        }
    }
}

fn evidence_samples(run: &Run, m: &EvidenceMetric, use_reps: bool) -> Samples {
    if use_reps {
        Samples {
            xs: run
                .repetitions
                .iter()
                .filter_map(|r| r.evidence.as_ref().and_then(m.window))
                .collect(),
            repetitions: true,
        }
    } else {
        Samples {
            xs: run
                .evidence
                .iter()
                .flat_map(|e| e.samples.iter())
                .filter_map(m.per_sample)
                .collect(),
            repetitions: false,
        }
    }
}

/// The verdict for one number: the baseline's and the other's samples.
fn change(base: Option<f64>, value: Option<f64>, a: &Samples, b: &Samples) -> Option<Change> {
    let (base, value) = (base?, value?);
    let pct = (base != 0.0).then(|| (value - base) * 100.0 / base.abs());
    let (sa, sb) = (a.side(), b.side());
    // Fewer than 2 repetitions, or ~3 independent seconds, is no basis for a test.
    let min_n = if a.repetitions { 2.0 } else { 3.0 };
    let p = if sa.2 >= min_n && sb.2 >= min_n {
        welch_p(sa, sb)
    } else {
        None
    };
    let verdict = match p {
        None if base == value => Verdict::NotSignificant,
        None => Verdict::NotEnoughData,
        Some(p) if p < ALPHA => Verdict::Significant,
        Some(_) => Verdict::NotSignificant,
    };
    Some(Change {
        pct,
        verdict,
        p_value: p,
        samples: if a.repetitions {
            "repetitions"
        } else {
            "seconds"
        }
        .to_string(),
    })
}

/// Compares `runs` (label, Run) with the first. Needs at least two.
pub fn compare(runs: &[(String, Run)]) -> Comparison {
    let base = &runs[0].1;
    let reps = |r: &Run| r.repetitions.len();
    let use_reps = |other: &Run| reps(base) >= 2 && reps(other) >= 2;
    let mut rows = Vec::new();
    for m in LOAD_METRICS {
        let values: Vec<Option<f64>> = runs.iter().map(|(_, r)| (m.value)(&r.results)).collect();
        let changes = runs[1..]
            .iter()
            .enumerate()
            .map(|(i, (_, r))| {
                let u = use_reps(r);
                change(
                    values[0],
                    values[i + 1],
                    &load_samples(base, m, u),
                    &load_samples(r, m, u),
                )
            })
            .collect();
        rows.push(CompareRow {
            metric: m.name.to_string(),
            unit: m.unit.to_string(),
            higher_is_better: Some(m.higher_is_better),
            group: "load".to_string(),
            values,
            texts: Vec::new(),
            changes,
        });
    }
    rows.push(CompareRow {
        metric: "first bottleneck".to_string(),
        unit: "text".to_string(),
        higher_is_better: None,
        group: "load".to_string(),
        values: runs.iter().map(|_| None).collect(),
        texts: runs
            .iter()
            .map(|(_, r)| {
                r.findings
                    .iter()
                    .find(|f| f.kind == Kind::Bottleneck)
                    .map_or("-".to_string(), |f| f.id.clone())
            })
            .collect(),
        changes: runs[1..].iter().map(|_| None).collect(),
    });
    rows.extend(endpoint_rows(runs, &use_reps));
    rows.extend(moved_most(runs, &use_reps));
    Comparison {
        schema_version: COMPARISON_SCHEMA_VERSION,
        tool: format!("loadlens {}", env!("CARGO_PKG_VERSION")),
        runs: runs
            .iter()
            .map(|(label, r)| ComparedRun {
                label: label.clone(),
                url: r.spec.url.clone(),
                repetitions: reps(r).max(1),
                client_saturated: r.client.saturated
                    || r.repetitions.iter().any(|x| x.client.saturated),
            })
            .collect(),
        rows,
        warnings: warnings(runs),
        method: METHOD.to_string(),
    }
}

/// What is compared per endpoint of a `--targets` mix: name, unit, larger is better,
/// the value in one load's results.
type EndpointMetric = (
    &'static str,
    &'static str,
    bool,
    fn(&LoadResults, &str) -> Option<f64>,
);
const ENDPOINT_METRICS: [EndpointMetric; 3] = [
    ("requests/s", "req/s", true, |r, n| {
        let e = r.endpoints.iter().find(|e| e.name == n)?;
        Some(e.responses as f64 / r.duration_s.max(1e-9))
    }),
    ("latency mean", "us", false, |r, n| {
        let e = r.endpoints.iter().find(|e| e.name == n)?;
        (e.latency.count > 0).then_some(e.latency.mean_us)
    }),
    ("latency p99", "us", false, |r, n| {
        let e = r.endpoints.iter().find(|e| e.name == n)?;
        e.latency.at(99.0).map(|v| v as f64)
    }),
];

/// Rows per endpoint of mixed Runs (group `endpoint`), every name of any Run, the
/// baseline's first. Their verdicts come from repetitions (`--repeat`), the only
/// independent samples an endpoint has: Runs of one repetition each show the change
/// with `not_enough_data`.
fn endpoint_rows(runs: &[(String, Run)], use_reps: &dyn Fn(&Run) -> bool) -> Vec<CompareRow> {
    let mut names: Vec<&str> = Vec::new();
    for (_, r) in runs {
        for e in &r.results.endpoints {
            if !names.contains(&e.name.as_str()) {
                names.push(&e.name);
            }
        }
    }
    let base = &runs[0].1;
    let samples =
        |run: &Run, f: fn(&LoadResults, &str) -> Option<f64>, n: &str, reps: bool| Samples {
            xs: if reps {
                repetitions_of(run)
                    .into_iter()
                    .filter_map(|r| f(r, n))
                    .collect()
            } else {
                Vec::new()
            },
            repetitions: true,
        };
    let mut rows = Vec::new();
    for name in names {
        for (metric, unit, higher, f) in ENDPOINT_METRICS {
            let values: Vec<Option<f64>> = runs.iter().map(|(_, r)| f(&r.results, name)).collect();
            let changes = runs[1..]
                .iter()
                .enumerate()
                .map(|(i, (_, r))| {
                    let u = use_reps(r);
                    change(
                        values[0],
                        values[i + 1],
                        &samples(base, f, name, u),
                        &samples(r, f, name, u),
                    )
                })
                .collect();
            rows.push(CompareRow {
                metric: format!("{name}: {metric}"),
                unit: unit.to_string(),
                higher_is_better: Some(higher),
                group: "endpoint".to_string(),
                values,
                texts: Vec::new(),
                changes,
            });
        }
    }
    rows
}

/// The evidence rows whose values moved most between the baseline and any other run.
fn moved_most(runs: &[(String, Run)], use_reps: &dyn Fn(&Run) -> bool) -> Vec<CompareRow> {
    let base = &runs[0].1;
    let mut scored: Vec<(f64, CompareRow)> = Vec::new();
    for m in EVIDENCE {
        let values: Vec<Option<f64>> = runs
            .iter()
            .map(|(_, r)| r.evidence.as_ref().and_then(m.window))
            .collect();
        let Some(b) = values[0] else { continue };
        // How far the furthest run moved, relative to the larger of the two values.
        let moved = values[1..]
            .iter()
            .flatten()
            .filter(|v| (*v - b).abs() >= m.min_change)
            .map(|v| (v - b).abs() / v.abs().max(b.abs()).max(1e-9))
            .fold(0.0, f64::max);
        if moved < 0.05 {
            continue;
        }
        let changes = runs[1..]
            .iter()
            .enumerate()
            .map(|(i, (_, r))| {
                let u = use_reps(r);
                change(
                    values[0],
                    values[i + 1],
                    &evidence_samples(base, m, u),
                    &evidence_samples(r, m, u),
                )
            })
            .collect();
        scored.push((
            moved,
            CompareRow {
                metric: m.name.to_string(),
                unit: m.unit.to_string(),
                higher_is_better: None,
                group: "evidence".to_string(),
                values,
                texts: Vec::new(),
                changes,
            },
        ));
    }
    scored.sort_by(|x, y| y.0.total_cmp(&x.0));
    scored
        .into_iter()
        .take(EVIDENCE_ROWS)
        .map(|(_, r)| r)
        .collect()
}

/// Where the runs differ in what was asked, and saturated clients.
fn warnings(runs: &[(String, Run)]) -> Vec<String> {
    let (la, a) = (&runs[0].0, &runs[0].1.spec);
    let mut out = Vec::new();
    for (lb, run) in &runs[1..] {
        let b = &run.spec;
        let fields: [(&str, String, String); 8] = [
            ("URL", a.url.clone(), b.url.clone()),
            (
                "connections",
                a.connections.to_string(),
                b.connections.to_string(),
            ),
            (
                "client threads",
                a.threads.to_string(),
                b.threads.to_string(),
            ),
            (
                "duration",
                format!("{:?}", a.duration_s),
                format!("{:?}", b.duration_s),
            ),
            (
                "requests (-n)",
                format!("{:?}", a.requests),
                format!("{:?}", b.requests),
            ),
            (
                "requests per connection",
                format!("{:?}", a.connreqs),
                format!("{:?}", b.connreqs),
            ),
            (
                "rate (-R)",
                format!("{:?}", a.rate),
                format!("{:?}", b.rate),
            ),
            (
                "method and headers",
                format!("{} {:?}", a.method, a.headers),
                format!("{} {:?}", b.method, b.headers),
            ),
        ];
        for (what, x, y) in fields {
            if x != y {
                out.push(format!(
                    "{lb} differs from {la} in what was asked: {what} {} vs {}",
                    pretty(&y),
                    pretty(&x)
                ));
            }
        }
    }
    for (label, run) in runs {
        if run.client.saturated || run.repetitions.iter().any(|r| r.client.saturated) {
            out.push(format!(
                "{label}: the load generator was saturated: its numbers are a floor of what the server can do"
            ));
        }
    }
    out
}

/// `Some(10.0)` → `10.0`, `None` → `none`.
fn pretty(s: &str) -> String {
    if s == "None" {
        "none".to_string()
    } else if let Some(x) = s.strip_prefix("Some(").and_then(|x| x.strip_suffix(')')) {
        x.to_string()
    } else {
        s.to_string()
    }
}

/// Whether any later run is significantly slower than the baseline by more than `pct`
/// percent: fewer requests/s, or a higher p99. For `--fail-if-slower`.
pub fn slower_than(c: &Comparison, pct: f64) -> Vec<String> {
    let mut out = Vec::new();
    for row in &c.rows {
        let worse_sign = match (row.metric.as_str(), row.higher_is_better) {
            ("requests/s", Some(true)) => -1.0,
            ("latency p99", Some(false)) => 1.0,
            _ => continue,
        };
        for (i, ch) in row.changes.iter().enumerate() {
            let Some(ch) = ch else { continue };
            if let (Verdict::Significant, Some(p)) = (ch.verdict, ch.pct) {
                if p * worse_sign > pct {
                    out.push(format!(
                        "{}: {} {:+.1}% (significant)",
                        c.runs[i + 1].label,
                        row.metric,
                        p
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::test_endpoint;

    fn run(latency_us: u64) -> Run {
        let path = format!(
            "{}/tests/data/runs/healthy-before.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut run = Run::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        run.results.endpoints = vec![
            test_endpoint("GET /a", &[1000, 1000]),
            test_endpoint("GET /b", &[latency_us, latency_us]),
        ];
        run
    }

    #[test]
    fn mixed_runs_compare_per_endpoint() {
        let c = compare(&[("A".into(), run(2000)), ("B".into(), run(3000))]);
        let rows: Vec<&CompareRow> = c.rows.iter().filter(|r| r.group == "endpoint").collect();
        assert_eq!(rows.len(), 6, "3 numbers for each of 2 endpoints");
        let b = rows
            .iter()
            .find(|r| r.metric == "GET /b: latency mean")
            .unwrap();
        // HdrHistogram's 3 significant figures: 3000 µs is kept as 3001.
        let near = |v: Option<f64>, want: f64| (v.unwrap() - want).abs() <= want * 1e-3;
        assert!(
            near(b.values[0], 2000.0) && near(b.values[1], 3000.0),
            "{:?}",
            b.values
        );
        let ch = b.changes[0].as_ref().unwrap();
        assert!((ch.pct.unwrap() - 50.0).abs() < 0.5, "{:?}", ch.pct);
        // One repetition each: no independent samples per endpoint to test.
        assert_eq!(ch.verdict, Verdict::NotEnoughData);
        let a = rows
            .iter()
            .find(|r| r.metric == "GET /a: latency mean")
            .unwrap();
        assert_eq!(
            a.changes[0].as_ref().unwrap().verdict,
            Verdict::NotSignificant
        );
    }
}
