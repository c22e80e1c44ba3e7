//! `loadlens tune`: the session recorded on the baseline Run — each step's change (a
//! directive of the server's own config or a sysctl), its diff, the A/B pairs run to
//! test it, the interval of the gain and the decision. Data only.

use serde::{Deserialize, Serialize};

use super::{Fact, ServerKind};

/// A tune session: what was changed, how it was tested, what was kept.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TuneSession {
    /// What each load was judged by: `throughput` (2xx/3xx responses per second),
    /// `rps`, `p99`, or an objective such as `p99<200ms` (its metric).
    pub objective: String,
    /// Whether a larger value of the objective is better.
    pub higher_is_better: bool,
    /// `--apply`: changes were written and tested; otherwise a dry run.
    pub applied: bool,
    /// A/B pairs run per change (`--pairs`).
    pub pairs: u32,
    /// The smallest gain kept, percent (`--min-gain`): the interval's lower end must be
    /// above it.
    pub min_gain_pct: f64,
    /// The objective of the baseline (mean over its repetitions).
    pub baseline: LoadSummary,
    /// Each change tried, in order.
    pub steps: Vec<TuneStep>,
    /// The sysctls changed and how to put each back (`sysctl -w …`), when any was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restore_commands: Vec<String>,
    /// The signal that ended the session early (`SIGINT`, `SIGTERM`); the live change
    /// was put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
}

/// One load, summarised.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadSummary {
    /// The objective's value (in its unit: responses/s, or µs for latency).
    pub objective: f64,
    pub requests_per_s: f64,
    /// 2xx/3xx responses per second.
    pub good_per_s: f64,
    pub p99_us: u64,
    /// Failed requests (connect, read, timeout, …).
    pub errors: u64,
    pub non_2xx_3xx: u64,
    /// The servers reloaded before this load and how each had settled when it began
    /// (in the pairs every load follows a reload; none for the baseline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled: Vec<Settle>,
}

/// A server after its reload, when the load that followed began: its new worker
/// processes, once their set and threads held still over a few checks with none of
/// them, nor the master, running (php-fpm forks `pm.start_servers` children after
/// re-executing itself: on a busy host, after its first child served, a load of 1 s
/// met a pool still forking and served nothing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settle {
    pub server: ServerKind,
    /// The process reloaded (the master).
    pub pid: i32,
    /// Its new worker processes: the children its reload started, and theirs.
    pub workers: u32,
    /// Their threads.
    pub threads: u32,
    /// From the reload signal until settled (or until the bound), ms.
    pub after_ms: u64,
    /// Whether it settled; `false`: still changing at the bound (5 s after its new
    /// workers came), and the load went on.
    pub steady: bool,
}

/// One change tried.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TuneStep {
    /// The finding the change answers (`upstream-saturated`), or `--try`.
    pub finding: String,
    /// Why this change, in one or two sentences.
    pub reason: String,
    /// The numbers behind it (the finding's evidence).
    pub evidence: Vec<Fact>,
    /// What is changed: one or more edits, applied and put back together.
    pub edits: Vec<TuneEdit>,
    /// The unified diff of every file the change edits.
    pub diff: String,
    /// old, new, old, new …: each pair's loads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<TunePair>,
    /// The gain over the pairs, when they ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain: Option<Gain>,
    pub decision: Decision,
    /// Why this decision, in one line.
    pub why: String,
}

/// One edit of a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TuneEdit {
    /// A directive of a server's config file.
    Directive {
        server: ServerKind,
        /// The server process reloaded after the edit.
        pid: i32,
        file: String,
        directive: String,
        /// The value before; absent when the directive is added.
        old: Option<String>,
        new: String,
        /// The block it is added to (`upstream app`), when added.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        block: Option<String>,
    },
    /// A kernel setting, in the server's network namespace (process `pid`'s).
    Sysctl {
        pid: i32,
        key: String,
        old: String,
        new: String,
    },
}

/// One A/B pair: the same load on the old config, then on the new one.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TunePair {
    pub old: LoadSummary,
    pub new: LoadSummary,
    /// The gain of new over old, percent (positive = better, whichever the direction):
    /// new ÷ old − 1 (old ÷ new − 1 when lower is better), at most +1000%.
    pub gain_pct: f64,
}

/// The gain of a change over its pairs: the mean and 95% interval (Student's t) of the
/// per-pair ratios, taken on their logarithms (a geometric mean), as percent; and the
/// spread of each side.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gain {
    pub mean_pct: f64,
    pub low_pct: f64,
    pub high_pct: f64,
    pub pairs: u32,
    /// Coefficient of variation of the old loads' objective, percent.
    pub spread_old_pct: f64,
    /// Coefficient of variation of the new loads' objective, percent.
    pub spread_new_pct: f64,
}

/// What became of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Shown, not applied (no `--apply`).
    DryRun,
    /// A significant gain: left in place.
    Kept,
    /// No significant gain (or the spread blew up): put back.
    Reverted,
    /// The config test, the reload or the server failed: put back.
    Failed,
    /// Interrupted by a signal: put back.
    Interrupted,
}
