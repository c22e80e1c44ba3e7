//! A comparison of Runs (`loadlens compare A.json B.json …`): the same numbers side by
//! side, each later Run against the first (the baseline), with the change and whether it
//! is statistically significant. A record like the Run: the views render it.

use serde::{Deserialize, Serialize};

/// Version of the comparison's JSON layout.
pub const COMPARISON_SCHEMA_VERSION: u32 = 1;

/// Several Runs compared with the first.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Comparison {
    pub schema_version: u32,
    /// The program that wrote the file, e.g. `loadlens 0.1.0`.
    pub tool: String,
    /// The Runs compared, in order; the first is the baseline.
    pub runs: Vec<ComparedRun>,
    /// One row per number; `values[i]` belongs to `runs[i]`.
    pub rows: Vec<CompareRow>,
    /// Where the runs differ in what was asked, or a client was saturated: reasons to
    /// read the verdicts with care.
    pub warnings: Vec<String>,
    /// How the verdicts were reached, in one paragraph.
    pub method: String,
}

/// One of the Runs compared.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ComparedRun {
    /// Where it was read from (or a label).
    pub label: String,
    pub url: String,
    /// Repetitions it holds (1 for a single run).
    pub repetitions: usize,
    /// Its load generator was saturated (its numbers are a floor).
    pub client_saturated: bool,
}

/// A number across the Runs.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareRow {
    /// What is compared, e.g. `requests/s`, `latency p99`, `TIME_WAIT max`.
    pub metric: String,
    /// `req/s`, `us`, `count`, … ; `text` for rows that are names (first bottleneck).
    pub unit: String,
    /// Whether a larger value is better (requests/s) or worse (latency, errors);
    /// `None` for rows without a direction.
    pub higher_is_better: Option<bool>,
    /// Which group of rows it belongs to: `load` (what the client measured),
    /// `endpoint` (per endpoint of a `--targets` mix, metric `NAME: what`) or
    /// `evidence` (what the watch saw: the numbers that moved most).
    pub group: String,
    /// The value in each Run (`None` where the Run does not have it).
    pub values: Vec<Option<f64>>,
    /// The text of rows whose unit is `text`, one per Run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub texts: Vec<String>,
    /// Each later Run against the baseline: `changes[i]` compares `runs[i + 1]`.
    pub changes: Vec<Option<Change>>,
}

/// A change against the baseline and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Change {
    /// (value − baseline) / baseline, percent; `None` when the baseline is 0.
    pub pct: Option<f64>,
    pub verdict: Verdict,
    /// Two-sided p-value of the test, when one could be made.
    pub p_value: Option<f64>,
    /// The samples the test used: `repetitions` or `seconds` (per-second values of one
    /// run each, counted at their effective size for autocorrelation).
    pub samples: String,
}

/// Whether a change is more than noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// p < 0.05.
    Significant,
    NotSignificant,
    /// Too few samples on a side to test (say: repeat the runs with `--repeat`).
    NotEnoughData,
}
