//! `--stages` and `--abort-if-behind`: what each stage of a load did, and where a load
//! that fell behind its schedule was stopped.

use serde::{Deserialize, Serialize};

/// One stage of a `--stages` load, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StageResult {
    /// The stage as given, e.g. `30s:1000` or `1m:c200`.
    pub stage: String,
    /// Start and end of the stage, seconds from the start of the load (the end of a
    /// stopped run's last stage is when it stopped).
    pub start_s: f64,
    pub end_s: f64,
    /// The target at the stage's start and end (requests per second, or connections):
    /// the stage ramps linearly between them.
    pub target_from: f64,
    pub target_to: f64,
    /// Rate stages: the requests the schedule had due in the stage, ÷ its length (the
    /// mean of the ramp's two ends); connection stages: absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rps: Option<f64>,
    /// Requests completed in the stage: responses plus failed requests, counted by the
    /// 100 ms slice they ended in (a stage lasts whole slices).
    pub requests: u64,
    pub responses: u64,
    pub errors: u64,
    /// Requests completed per second of the stage.
    pub achieved_rps: f64,
    /// Latency of the responses in the seconds that began in the stage, µs (from the
    /// seconds' HdrHistograms; 0 when none).
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// `--abort-if-behind P%`: the load was stopped because the requests completed fell
/// behind the schedule by more than P% over the last `window_s` seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Abort {
    /// When the load was stopped, seconds from its start.
    pub at_s: f64,
    /// The window the rates were taken over, seconds.
    pub window_s: f64,
    /// What the schedule asked over the window, requests per second.
    pub scheduled_rps: f64,
    /// What was completed over the window (responses plus failed requests) per second.
    pub achieved_rps: f64,
    /// How far behind, percent of the scheduled rate.
    pub behind_pct: f64,
    /// The bound given (`--abort-if-behind`), percent.
    pub limit_pct: f64,
}
