//! A sweep (`loadlens sweep`): a study in one command, either a grid of loads (the cross
//! product of the values given for URL, connections, threads, requests per connection,
//! rate), or the climb to the highest open-loop rate that meets a latency SLO. Every
//! load's Run is kept whole; the views render the table, the CSV and the curve.

use serde::{Deserialize, Serialize};

use super::Run;

/// Version of the sweep's JSON layout.
pub const SWEEP_SCHEMA_VERSION: u32 = 1;

/// A study: its dimensions, every cell's Run, and the ceiling when one was searched.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sweep {
    pub schema_version: u32,
    /// The program that wrote the file, e.g. `loadlens 0.1.0`.
    pub tool: String,
    /// The dimensions that vary, in the order of the table (rows, then columns).
    pub dims: Vec<Dim>,
    /// Every load run, in the order run.
    pub cells: Vec<Cell>,
    /// The ceiling search (`--ceiling --slo …`), when asked for.
    #[serde(default)]
    pub ceiling: Option<Ceiling>,
    /// The study was stopped (Ctrl-C) before every cell ran.
    pub interrupted: bool,
}

/// A dimension of the grid: a flag and its values as given.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Dim {
    /// `url`, `connections`, `threads`, `connreqs` or `rate`.
    pub name: String,
    pub values: Vec<String>,
}

/// One load of the study.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    /// This cell's value of each dimension, in the order of `dims`.
    pub coords: Vec<String>,
    pub run: Run,
}

/// The highest rate that met a latency objective, and what broke it above.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ceiling {
    /// The objective, as given (e.g. `p99<200ms`).
    pub slo: String,
    /// The error budget, as given (e.g. `<0.1%`), if any.
    pub errors: Option<String>,
    /// The ceiling: what the server completed (requests/s) at the highest scheduled rate
    /// that met the objectives — a rate counts as met only when the server completed at
    /// least 98% of it and latency did not climb within the load; `None` when even the
    /// lowest rate tried broke them.
    pub met_rate: Option<f64>,
    /// The lowest rate that broke it.
    pub broke_rate: Option<f64>,
    /// Why that rate broke it (the number against the objective).
    pub broke_because: Option<String>,
    /// The first bottleneck the diagnosis named at that rate.
    pub broke_finding: Option<String>,
    /// Every rate tried, lowest first: the rate → latency curve (the knee is where p99
    /// leaves p50 behind).
    pub steps: Vec<Step>,
    /// Why the search ended: `converged` (the bracket is within 5%), `budget`,
    /// `errors` (the server failed), `interrupted`, `no-break` (every rate tried, up to
    /// the step limit, met it).
    pub stopped: String,
}

/// One rate of the ceiling search.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    /// Scheduled requests per second.
    pub rate: f64,
    /// Responses per second actually completed.
    pub achieved_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// The number the objective is about (e.g. p99), µs.
    pub slo_value_us: u64,
    /// Failed requests and non-2xx/3xx responses, percent of attempts.
    pub errors_pct: f64,
    pub met: bool,
    /// Index of this step's Run in `cells`.
    pub cell: usize,
}
