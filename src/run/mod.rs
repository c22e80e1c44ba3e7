//! The Run: the one artifact a run produces, and the bottom of the pipeline. The engine
//! fills [`LoadResults`] and [`ClientCheck`], the watch fills [`Evidence`] (with its
//! [`Topology`]), the diagnosis adds [`Finding`]s; every view (terminal, JSON, compare…)
//! is rendered from it, also later from its JSON (`loadlens report run.json`).
//!
//! This module holds data only: serde and schema derives, construction helpers and
//! (de)serialisation. It imports nothing from the layers that fill or read it (engine,
//! watch, diagnose, report), so each of them can be read and tested alone.
//!
//! The doc comments on these structs are the documentation of the JSON format
//! (`docs/run.schema.json` is generated from them); keys are snake_case and units are in
//! the names. `schema_version` changes when a field changes meaning or disappears (adding
//! a field does not change it).

mod client;
mod compare;
pub mod counters;
mod endpoint;
mod evidence;
mod finding;
mod load;
mod logs;
mod offcpu;
mod path;
mod profile;
mod repeat;
mod segment;
mod slo;
mod stages;
mod sweep;
mod topology;
mod tune;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::spec::Spec;

pub use client::{ClientCheck, ClientQuota, ThreadCpu};
pub use compare::{
    Change, CompareRow, ComparedRun, Comparison, Verdict, COMPARISON_SCHEMA_VERSION,
};
pub use counters::Counter;
#[cfg(test)]
pub(crate) use endpoint::tests::endpoint as test_endpoint;
pub use endpoint::{merged as merged_endpoints, EndpointResult};
pub use evidence::{
    CgroupQuota, ConnWindow, Conntrack, CpuPct, Evidence, EvidenceSource, HostFacts, IfaceRate,
    OtherProcess, ProcRates, QueueGauge, QueueMax, Sample, UdpCounters, UdpSocketWindow, UdpWindow,
    Window,
};
pub use finding::{Fact, Finding, Kind};
pub use load::{
    decode_histogram, encode_histogram, ErrorCounts, LatencySummary, LoadMetric, LoadResults,
    Percentile, Phases, QuicCounts, QuicStats, Second, Slice, Spread, LOAD_METRICS, PERCENTILES,
};
pub use logs::{LogClass, ServerLog};
pub use offcpu::{OffClass, OffCpu, OffProcess, OffStall, OffWait, STALL_MS};
pub use path::{PathTier, Probe, RequestPath};
pub use profile::{split_frame, Profile, Stack, Top, TopFunction, KERNEL_SUFFIX};
pub use repeat::Repetition;
pub use segment::{Merged, Segment, SegmentPart};
pub use slo::{ObjectiveResult, Trust};
pub use stages::{Abort, StageResult};
pub use sweep::{Ceiling, Cell, Dim, Step, Sweep, SWEEP_SCHEMA_VERSION};
pub use topology::{
    KindInfo, Listener, Role, ServerConfig, ServerKind, ServerProcess, Tier, Topology, KINDS,
};
pub use tune::{Decision, Gain, LoadSummary, Settle, TuneEdit, TunePair, TuneSession, TuneStep};

/// Version of the JSON layout below.
pub const SCHEMA_VERSION: u32 = 1;

/// One load run and everything known about it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Run {
    /// Version of this layout (see `SCHEMA_VERSION`).
    pub schema_version: u32,
    /// The program that wrote the file, e.g. `loadlens 0.1.0`.
    pub tool: String,
    /// When the load started (the first request was due), seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// What was asked.
    pub spec: Spec,
    /// The address the load was sent to (the first of the URL's addresses that accepted).
    pub target_addr: String,
    /// What the load engine measured.
    pub results: LoadResults,
    /// The load generator's own CPU use: whether the client, not the server, set the pace.
    pub client: ClientCheck,
    /// What was watched on the machine during the load; absent with `--no-watch`.
    #[serde(default)]
    pub evidence: Option<Evidence>,
    /// Things the user should know about this run (degraded measurements, caveats).
    pub warnings: Vec<String>,
    /// What limited the run, ranked: bottlenecks first, by confidence (see
    /// `loadlens explain ID`).
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// `--repeat N`: each repetition whole, in order. Then `results` holds the totals
    /// over all of them (histograms merged), `client` and `evidence` are the last
    /// repetition's, and `findings` are those of any repetition, each noting in how many
    /// it was found. Empty for a single run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repetitions: Vec<Repetition>,
    /// The signal that ended the load early (`SIGINT`, `SIGTERM`): the results hold what
    /// was measured until then. Absent for a run that ran its course.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// `--segment I/N`: this Run is one share of a load split over machines (its `spec`
    /// is the share). Absent for a whole load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<Segment>,
    /// `loadlens merge`: this Run is the sum of segment Runs (its `spec` is the whole
    /// load, `client` all segments' threads together). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<Merged>,
    /// `--slo`: each objective judged on this Run, in the order given. Absent when no
    /// objective was given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objectives: Vec<ObjectiveResult>,
    /// Whether the evidence could be trusted to judge the objectives (judged with them,
    /// before them). Absent when no objective was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
    /// Short loads run beside this one to test the diagnosis (`--probe`, on by default
    /// for a closed loop when one run's evidence admits several causes): at 1
    /// connection, at more. Empty when none ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<Probe>,
    /// Where the requests' time went along their path (the diagnosis's model); absent
    /// when the server was not watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<RequestPath>,
    /// `loadlens tune`: the changes tried on the server from this baseline, each tested
    /// by A/B pairs, and what was kept. Absent for other runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<TuneSession>,
}

impl Run {
    pub fn from_json(text: &str) -> anyhow::Result<Run> {
        let v: serde_json::Value = serde_json::from_str(text).context("not JSON")?;
        match v.get("schema_version").and_then(|x| x.as_u64()) {
            Some(n) if n == SCHEMA_VERSION as u64 => {}
            Some(n) if n > SCHEMA_VERSION as u64 => anyhow::bail!(
                "this Run has schema_version {n}, from a newer loadlens: this one reads version {SCHEMA_VERSION} (upgrade loadlens)"
            ),
            Some(n) => anyhow::bail!(
                "this Run has schema_version {n}: this loadlens reads version {SCHEMA_VERSION}"
            ),
            None => anyhow::bail!("not a loadlens Run: no schema_version"),
        }
        let run: Run = serde_json::from_value(v).context("not a loadlens Run")?;
        // Indexes the views follow without checking (a hand-edited or damaged file): the
        // on-CPU profile's and the off-CPU one's.
        let ev = run.evidence.as_ref();
        let on = ev.and_then(|e| e.profile.as_ref());
        let off = ev.and_then(|e| e.offcpu.as_ref()).map(|o| &o.profile);
        for p in on.into_iter().chain(off) {
            if let Some(bad) = p
                .stacks
                .iter()
                .flat_map(|s| &s.frames)
                .find(|&&f| f as usize >= p.frames.len())
            {
                anyhow::bail!(
                    "not a loadlens Run: a profile stack names frame {bad} of {}",
                    p.frames.len()
                );
            }
        }
        Ok(run)
    }
}
