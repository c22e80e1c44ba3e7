//! Findings: what the diagnosis concluded from a Run, each with the numbers that prove
//! it and the fix. The rules that produce them live in `diagnose`.

use serde::{Deserialize, Serialize};

/// How a finding bears on the result.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// This limited the run.
    Bottleneck,
    /// Worth knowing; did not set the pace (or not alone).
    Warning,
    /// Context: what the limit was when nothing is wrong.
    Info,
}

/// One named number with its unit, taken from the Run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fact {
    pub name: String,
    pub value: f64,
    pub unit: String,
}

/// A finding. `id` values are stable (documented in docs/findings.md and by `loadlens explain`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// Stable kebab-case identifier, e.g. `listen-queue-overflow`.
    pub id: String,
    pub kind: Kind,
    /// 0–1, from how strongly the evidence agrees (how far past the threshold, how many
    /// independent signals).
    pub confidence: f64,
    /// One line naming the resource and where.
    pub title: String,
    /// The numbers that prove it.
    pub evidence: Vec<Fact>,
    /// The mechanism, in two or three sentences.
    pub explanation: String,
    /// What to change: the directive or sysctl, its current value where known, a
    /// suggested value.
    pub fix: String,
    /// The finding this one was demoted beside or below (`run-queue-delay`): its
    /// consequence ("Because of …", "Explained by …" in `explanation`) or a limit it
    /// stands beside ("Beside …"). Absent when it stands on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because_of: Option<String>,
}
