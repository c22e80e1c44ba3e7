//! The request path as the diagnosis saw it — client → network → front server → each
//! upstream, with the requests in each tier, waiting in front of it, its workers and
//! its share of the latency — and the probes (short loads at other connection counts)
//! that tested it.

use serde::{Deserialize, Serialize};

/// Where the requests' time went, tier by tier (Little's law per tier: the requests
/// in a tier ÷ the rate is the time each spends there).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RequestPath {
    /// The tiers in the order a request passes them.
    pub tiers: Vec<PathTier>,
    /// The name of the tier requests wait in front of, or whose capacity is used up;
    /// absent when no tier is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
    /// Why that tier, in a sentence (what was waiting, what was used up).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// One tier of the request path over the load window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PathTier {
    /// `client`, `network`, `front` or `upstream`.
    pub role: String,
    /// How people call it: `loadlens`, `nginx`, `java on 10.77.0.2:9000`.
    pub name: String,
    /// Requests in it on average (mean over the load's samples).
    pub in_flight: f64,
    /// Requests waiting in front of it on average (its accept queue; past its
    /// workers, when it has a known number of them).
    pub waiting: f64,
    /// Its workers (processes or threads that serve a request each), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// Of them, busy on average (running, or holding a request), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_busy: Option<f64>,
    /// Its busiest resource's use, percent (CPU of its workers as a share of the cores
    /// they can use); absent when it has none that was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilisation_pct: Option<f64>,
    /// Time each request spends in it, ms (in_flight ÷ rate), including waiting there.
    pub time_ms: f64,
    /// Its share of the mean latency, percent.
    pub share_pct: f64,
    /// Where its numbers come from (`connections on :9000 (sock_diag)`, `phases`…).
    pub basis: String,
}

/// A short load run beside the main one to tell two causes apart: at 1 connection
/// (the unloaded service time) or at more connections (does the rate grow?).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct Probe {
    /// Connections the probe kept open.
    pub connections: u32,
    /// How long it ran, seconds.
    pub duration_s: f64,
    pub responses: u64,
    /// Failed requests (errors and non-2xx/3xx).
    pub failed: u64,
    pub requests_per_s: f64,
    /// Mean latency, ms.
    pub mean_ms: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// Mean time to the first byte of the response, ms, when phases were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<f64>,
}
