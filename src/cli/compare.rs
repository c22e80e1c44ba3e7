//! `loadlens compare A.json B.json …`: saved Runs side by side with verdicts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::compare::{compare, slower_than};
use crate::report::compare::CompareText;
use crate::report::{self, Dest, Json, Output};
use crate::run::{Comparison, Run};

#[derive(Args, Debug)]
#[command(after_long_help = crate::compare::METHOD)]
pub struct CompareArgs {
    /// Runs written by `loadlens run --json FILE`; the first is the baseline.
    #[arg(required = true, num_args = 2.., value_name = "RUN.json")]
    files: Vec<PathBuf>,
    /// Also write the comparison as JSON to FILE (`-` = stdout, which silences the text).
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Write the comparison as a self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Exit 1 when a later run is significantly slower than the first by more than PCT
    /// percent: fewer requests/s, or a higher p99 (for CI). A gate: exit 3 instead,
    /// with the reason, when a Run's evidence cannot be trusted (a saturated client,
    /// another busy process, a missing segment).
    #[arg(long, value_name = "PCT")]
    fail_if_slower: Option<f64>,
    /// With --fail-if-slower: judge even Runs whose evidence cannot be trusted (a
    /// shared runner), exit 1 or 0 by the comparison, the reason a warning on stderr.
    #[arg(long = "judge-untrusted", requires = "fail_if_slower")]
    judge_untrusted: bool,
}

/// Reads a saved Run, naming the file in every error. A Run saved without its
/// findings (trimmed by hand, or recorded for tests) is diagnosed again: the rules are
/// pure functions of the Run.
pub fn read_run(path: &PathBuf) -> anyhow::Result<Run> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    saved_run(&text).with_context(|| format!("{}", path.display()))
}

/// A saved Run from its JSON text, diagnosed again when it has no findings.
pub fn saved_run(text: &str) -> anyhow::Result<Run> {
    let mut run = Run::from_json(text)?;
    if run.findings.is_empty() && run.evidence.is_some() {
        run.findings = crate::diagnose::diagnose(&run);
    }
    Ok(run)
}

pub fn cmd(a: CompareArgs) -> anyhow::Result<ExitCode> {
    if let Some(p) = a.fail_if_slower {
        if !(p.is_finite() && p >= 0.0) {
            anyhow::bail!("--fail-if-slower takes a percentage ≥ 0, e.g. 5");
        }
    }
    let json = a.json.as_deref().map(Dest::parse);
    if let Some(d) = &json {
        d.check("JSON")?;
    }
    let mut runs = Vec::new();
    for f in &a.files {
        runs.push((f.display().to_string(), read_run(f)?));
    }
    // The gate judges the evidence before any verdict: a Run that measured the client
    // or a busy machine is no baseline and no candidate.
    if a.fail_if_slower.is_some() {
        let refused: Vec<String> = runs
            .iter()
            .filter_map(|(name, run)| {
                let t = crate::gate::trust(run);
                (!t.trusted).then(|| format!("{name}: {}", t.why()))
            })
            .collect();
        if !refused.is_empty() && a.judge_untrusted {
            eprintln!(
                "loadlens: warning: evidence cannot be trusted, judged anyway (--judge-untrusted): {}",
                refused.join("; ")
            );
        } else if !refused.is_empty() {
            eprintln!(
                "loadlens: evidence cannot be trusted, no verdict: {}",
                refused.join("; ")
            );
            return Ok(ExitCode::from(super::ci::UNTRUSTED));
        }
    }
    let c = compare(&runs);
    let mut outputs: Vec<Output<Comparison>> = Vec::new();
    let text = json != Some(Dest::Stdout);
    outputs.extend(json.map(|d| Output::new(Json, d)));
    if let Some(p) = &a.html {
        let d = Dest::File(p.clone());
        d.check("HTML")?;
        let runs = runs.into_iter().map(|(_, r)| r).collect();
        outputs.push(Output::new(report::html::CompareHtml { runs }, d));
    }
    if text {
        outputs.push(Output::new(CompareText, Dest::Stdout));
    }
    report::write_all(&c, &outputs)?;
    if let Some(pct) = a.fail_if_slower {
        let slower = slower_than(&c, pct);
        if !slower.is_empty() {
            eprintln!("slower by more than {pct}%: {}", slower.join("; "));
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}
