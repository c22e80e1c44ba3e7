//! The objectives block (`--slo`): each objective, what was measured, met or broken,
//! and, judged before them, whether the evidence could be trusted. What the terminal
//! shows at the end of a Run; the HTML, Markdown and JUnit views lay out the same rows.

use std::fmt::Write as _;

use crate::run::{ObjectiveResult, Run};

/// `met`, `BROKEN`, or `not judged` when the evidence cannot be trusted (and was not
/// judged anyway).
pub fn result(run: &Run, o: &ObjectiveResult) -> &'static str {
    if !judged(run) {
        "not judged"
    } else if o.met {
        "met"
    } else {
        "BROKEN"
    }
}

/// Whether the Run's evidence was found trustworthy (or not judged at all).
pub fn trusted(run: &Run) -> bool {
    run.trust.as_ref().is_none_or(|t| t.trusted)
}

/// Whether the objectives are a verdict: the evidence trusted, or judged anyway.
pub fn judged(run: &Run) -> bool {
    run.trust
        .as_ref()
        .is_none_or(|t| t.trusted || t.judged_anyway)
}

/// The one line a Run whose evidence the gate doubts gets.
pub fn untrusted_line(run: &Run) -> Option<String> {
    let t = run.trust.as_ref().filter(|t| !t.trusted)?;
    Some(if t.judged_anyway {
        format!(
            "evidence cannot be trusted, objectives judged anyway (--judge-untrusted): {}",
            t.why()
        )
    } else {
        format!(
            "evidence cannot be trusted, objectives not judged: {}",
            t.why()
        )
    })
}

/// The block, empty when no objective was given.
pub fn render(run: &Run) -> String {
    let mut o = String::new();
    if run.objectives.is_empty() {
        return o;
    }
    let w = run
        .objectives
        .iter()
        .map(|x| x.objective.chars().count())
        .max()
        .unwrap_or(0)
        .max("objective".len());
    let _ = writeln!(o, "Objectives (--slo):");
    let _ = writeln!(o, "  {:<w$}  {:>14}  result", "objective", "measured");
    for x in &run.objectives {
        let _ = writeln!(
            o,
            "  {:<w$}  {:>14}  {}",
            x.objective,
            x.measured_text(),
            result(run, x)
        );
    }
    if let Some(line) = untrusted_line(run) {
        let _ = writeln!(o, "{line}");
    }
    o
}
