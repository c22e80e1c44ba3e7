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
    /// loadlens's CPU cgroup quota and what it did over the load: a container's CPU
    /// limit holds the client back without its threads looking busy. `None` where
    /// loadlens's cgroup has no quota or cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<ClientQuota>,
}

/// The CPU quota of loadlens's cgroup over the load (cgroup `cpu.max`/`cpu.stat`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientQuota {
    /// The quota, in cores (quota ÷ period).
    pub cores: f64,
    /// Enforcement periods during the load (`nr_periods`).
    pub periods: u64,
    /// Periods in which the quota ran out and the client's threads were stopped until
    /// the next one (`nr_throttled`).
    pub throttled_periods: u64,
    /// Time the cgroup was throttled during the load, ms (summed over CPUs).
    pub throttled_ms: f64,
}

impl ClientQuota {
    /// Share of the load's periods in which the quota ran out, percent.
    pub fn throttled_pct(&self) -> f64 {
        100.0 * self.throttled_periods as f64 / self.periods.max(1) as f64
    }
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
