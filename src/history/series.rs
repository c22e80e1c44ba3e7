//! A test's series of stored Runs and the change points in each of its numbers.

use serde::Serialize;

use super::changepoint::{change_pct, change_points, Options};
use super::Entry;

/// A number followed over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    RequestsPerS,
    P50Us,
    P99Us,
    MaxUs,
    Errors,
    ServerCpuUsPerRequest,
}

/// Every metric, in the order they are shown.
pub const METRICS: [Metric; 6] = [
    Metric::RequestsPerS,
    Metric::P50Us,
    Metric::P99Us,
    Metric::MaxUs,
    Metric::Errors,
    Metric::ServerCpuUsPerRequest,
];

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::RequestsPerS => "requests_per_s",
            Metric::P50Us => "p50_us",
            Metric::P99Us => "p99_us",
            Metric::MaxUs => "max_us",
            Metric::Errors => "errors",
            Metric::ServerCpuUsPerRequest => "server_cpu_us_per_request",
        }
    }

    /// Whether a higher value is better (throughput) or worse (latency, errors, CPU).
    pub fn higher_is_better(self) -> bool {
        self == Metric::RequestsPerS
    }

    /// The metric's value in `e` (`None`: not measured in that Run).
    pub fn of(self, e: &Entry) -> Option<f64> {
        match self {
            Metric::RequestsPerS => Some(e.requests_per_s),
            Metric::P50Us => Some(e.p50_us as f64),
            Metric::P99Us => Some(e.p99_us as f64),
            Metric::MaxUs => Some(e.max_us as f64),
            Metric::Errors => Some(e.errors as f64),
            Metric::ServerCpuUsPerRequest => e.server_cpu_us_per_request,
        }
    }
}

/// A change point in one metric: the series is different from Run `index` on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shift {
    pub metric: Metric,
    /// Position in the series (0 = the oldest Run shown).
    pub index: usize,
    /// The stored ids of the last Run before and the first Run after the change.
    pub before_id: i64,
    pub after_id: i64,
    /// Mean of the segment before and after (between the neighbouring change points).
    pub mean_before: f64,
    pub mean_after: f64,
    /// (after − before) / before, percent.
    pub change_pct: f64,
    /// The permutation test's p-value.
    pub p: f64,
    /// The change made the metric worse.
    pub regression: bool,
}

/// A test's series and its change points.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    pub name: String,
    /// The machine fingerprint the series was kept to (`None`: all machines).
    pub machine: Option<String>,
    /// Runs of other machines left out.
    pub other_machines: usize,
    pub runs: Vec<Entry>,
    pub change_points: Vec<Shift>,
}

impl Analysis {
    /// The change points at which the newest Run's segment started with a regression
    /// beyond `threshold_pct`: the last change point of a metric, when it made the
    /// metric worse by more than the threshold.
    pub fn newest_regressions(&self, threshold_pct: f64) -> Vec<&Shift> {
        METRICS
            .iter()
            .filter_map(|&m| self.change_points.iter().rfind(|s| s.metric == m))
            .filter(|s| s.regression && s.change_pct.abs() > threshold_pct)
            .collect()
    }
}

/// The series of `entries` (one test's, oldest first) and its change points. Only Runs
/// of the newest Run's machine unless `all_machines`: a faster runner is no change.
pub fn analyse(name: &str, entries: Vec<Entry>, all_machines: bool, o: &Options) -> Analysis {
    let machine = (!all_machines)
        .then(|| entries.last().map(|e| e.machine.clone()))
        .flatten();
    let total = entries.len();
    let runs: Vec<Entry> = entries
        .into_iter()
        .filter(|e| machine.as_ref().is_none_or(|m| &e.machine == m))
        .collect();
    let mut shifts = Vec::new();
    for m in METRICS {
        // The Runs that measured the metric; indexes map back to the series.
        let (at, xs): (Vec<usize>, Vec<f64>) = runs
            .iter()
            .enumerate()
            .filter_map(|(i, e)| m.of(e).map(|x| (i, x)))
            .unzip();
        let cps = change_points(&xs, o);
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(cps.iter().map(|c| c.index))
            .chain(std::iter::once(xs.len()))
            .collect();
        let mean = |a: usize, b: usize| xs[a..b].iter().sum::<f64>() / (b - a) as f64;
        for (k, c) in cps.iter().enumerate() {
            let before = mean(bounds[k], bounds[k + 1]);
            let after = mean(bounds[k + 1], bounds[k + 2]);
            let change_pct = change_pct(
                &xs[bounds[k]..bounds[k + 1]],
                &xs[bounds[k + 1]..bounds[k + 2]],
            );
            shifts.push(Shift {
                metric: m,
                index: at[c.index],
                before_id: runs[at[c.index - 1]].id,
                after_id: runs[at[c.index]].id,
                mean_before: before,
                mean_after: after,
                change_pct,
                p: c.p,
                regression: (after > before) != m.higher_is_better() && after != before,
            });
        }
    }
    shifts.sort_by_key(|s| s.index);
    Analysis {
        name: name.to_string(),
        machine,
        other_machines: total - runs.len(),
        runs,
        change_points: shifts,
    }
}
