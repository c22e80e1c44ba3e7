//! `loadlens explain ID`: the long form of each finding — mechanism, how to confirm it
//! by hand with standard tools, fixes, sources — from its row in the table of findings
//! (`rules/table.rs`).

use super::FindingId;

/// The long explanation of `id`, or `None` for an unknown id.
pub fn explain(id: &str) -> Option<String> {
    id.parse().ok().map(of)
}

/// The long explanation of a finding.
pub fn of(id: FindingId) -> String {
    let row = id.row();
    format!("{id}: {}\n\n{}\n", row.means, row.long)
}

/// `loadlens explain list`: every finding's id and what it means, one a line, in the
/// order the rules run.
pub fn list() -> String {
    FindingId::ALL
        .iter()
        .map(|id| format!("{:<28} {}\n", id.as_str(), id.row().means))
        .collect()
}
