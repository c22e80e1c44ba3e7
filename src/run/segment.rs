//! Loads split over machines: a segment Run says which share of the whole load it ran
//! (`--segment I/N`), and a merged Run (`loadlens merge`) which segments it holds, each
//! one's own counts and client self-check, and which are missing.

use serde::{Deserialize, Serialize};

use super::{ClientCheck, LatencySummary};

/// This Run is one segment of a load split over processes or machines: its `spec` is
/// this segment's share (connections, request budget, rate), and these are the whole
/// load's numbers it was split from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Segment {
    /// Which segment, from 1.
    pub index: u32,
    /// Segments of the whole load.
    pub count: u32,
    /// Connections of the whole load.
    pub whole_connections: u32,
    /// Request budget of the whole load (`-n`), if any.
    pub whole_requests: Option<u64>,
    /// Requests per second of the whole load (`-R`), if open loop.
    pub whole_rate: Option<f64>,
    /// `--start-at`: the agreed start, seconds since the Unix epoch; the load started
    /// at `started_unix_s`, as close after it as the clock allowed.
    pub start_at_unix_s: Option<f64>,
    /// Host name of the machine that ran the segment.
    pub host: String,
}

/// A Run merged from segment Runs: counters summed, histograms added, timelines aligned
/// on wall-clock seconds, findings diagnosed again on the sum.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Merged {
    /// Segments the whole load was split into.
    pub count: u32,
    /// The segments merged, by index.
    pub segments: Vec<SegmentPart>,
    /// Segments of the whole load with no Run (a machine that failed, a file not
    /// given): the merged numbers are those of the others only.
    pub missing: Vec<u32>,
    /// Why each missing segment is missing, where known (e.g. `node died`), in the
    /// order of `missing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_reasons: Vec<String>,
}

/// One segment's own numbers in a merged Run.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SegmentPart {
    /// Which segment, from 1.
    pub index: u32,
    /// Host name of the machine that ran it.
    pub host: String,
    /// When its load started, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Length of its load window, seconds.
    pub duration_s: f64,
    /// Its connections.
    pub connections: u32,
    /// Complete responses it received.
    pub responses: u64,
    /// Its failed requests, all classes.
    pub errors: u64,
    /// Its responses per second.
    pub requests_per_s: f64,
    /// Its own latency distribution (with its histogram): the merged one is the sum of
    /// these.
    pub latency: LatencySummary,
    /// Its own client self-check: a saturated client machine is named here.
    pub client: ClientCheck,
}
