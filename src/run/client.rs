//! The load generator's self-check: its worker threads' CPU use and run-queue wait.

use serde::{Deserialize, Serialize};

/// The load generator's self-check.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientCheck {
    /// Each worker thread's CPU use over its run.
    pub threads: Vec<ThreadCpu>,
    /// Mean busy share of the worker threads, percent of the wall-clock window.
    pub busy_pct_mean: f64,
    /// The workers were busy ≥ 90% of the run: the load generator set the pace, and
    /// the results are a floor of what the server can do.
    pub saturated: bool,
}

/// CPU use of one load worker thread.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadCpu {
    /// Kernel thread id.
    pub tid: i32,
    pub user_s: f64,
    pub system_s: f64,
    /// (user + system) / wall time, percent.
    pub busy_pct: f64,
    /// Time spent runnable but waiting for a CPU (schedstat), ms; `None` where
    /// /proc/thread-self/schedstat is not available.
    pub run_delay_ms: Option<f64>,
}
