//! Objectives judged on a Run (`--slo 'p99<200ms,errors<0.1%,rps>1000'`) and whether
//! its evidence could be trusted to judge them: what `run`, `merge` and `report` keep
//! in the Run and every CI view (terminal, HTML, JUnit, Markdown, OpenMetrics) reads.

use serde::{Deserialize, Serialize};

use crate::units::fmt_us;

/// One objective and the number measured against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ObjectiveResult {
    /// The objective as given, without spaces, e.g. `p99<200ms`.
    pub objective: String,
    /// What it is about: `p99` (any percentile `pNN.N` of the request latency), `mean`,
    /// `max`, `errors` (failed requests and non-2xx/3xx responses), `non2xx`, `rps`.
    pub metric: String,
    /// The comparison: `<`, `<=`, `>` or `>=`.
    pub op: String,
    /// The bound, in `unit`.
    pub bound: f64,
    /// The value measured on this Run, in `unit`; `None` when there was nothing to
    /// measure (no responses for a latency, no requests for a share), which breaks it.
    pub measured: Option<f64>,
    /// `us` (latency), `%` (share), `count` or `req/s`.
    pub unit: String,
    /// The measured value satisfies the objective.
    pub met: bool,
}

impl ObjectiveResult {
    /// A value in this objective's unit, as people read it: `41.22ms`, `0.05%`, `3`,
    /// `1234.5 req/s`.
    pub fn show(&self, v: f64) -> String {
        match self.unit.as_str() {
            "us" => fmt_us(v),
            "%" => format!("{}%", trim_float(v)),
            "req/s" => format!("{v:.1} req/s"),
            _ => format!("{v:.0}"),
        }
    }

    /// The measured value shown, or `none` when there was nothing to measure.
    pub fn measured_text(&self) -> String {
        self.measured.map_or("none".into(), |v| self.show(v))
    }

    /// What was wanted: `< 200.00ms`.
    pub fn wanted_text(&self) -> String {
        format!("{} {}", self.op, self.show(self.bound))
    }
}

/// `0.1` not `0.100000`; up to 3 decimals.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Whether a Run's evidence says it measured what it meant to: judged before the
/// objectives, which are no verdict on a Run that fails it (exit 3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Trust {
    /// The evidence can be trusted: the client had room, nothing else was busy on the
    /// machine, no segment was missing.
    pub trusted: bool,
    /// Why not, one line each (empty when trusted).
    pub reasons: Vec<String>,
    /// The objectives were judged though the evidence could not be trusted
    /// (`--judge-untrusted`, for a shared runner): the verdict is the objectives', the
    /// doubt is said beside it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub judged_anyway: bool,
}

impl Trust {
    /// The reasons in one line.
    pub fn why(&self) -> String {
        self.reasons.join("; ")
    }
}
