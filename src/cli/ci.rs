//! What turns a Run into a CI verdict and CI files, for `run`, `merge` and `report`:
//! `--slo` (objectives, judged with the gate of [`crate::gate`]), `--junit`,
//! `--summary-md` (also appended to `$GITHUB_STEP_SUMMARY`), `--hdr-log`,
//! `--openmetrics`; and the exit status a judged Run comes to ([`EXIT_STATUS`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::gate::{self, Verdict};
use crate::report::hdrlog::HdrLog;
use crate::report::junit::Junit;
use crate::report::markdown::{self, Markdown};
use crate::report::openmetrics::OpenMetrics;
use crate::report::{objectives, Dest, Output};
use crate::run::Run;
use crate::slo::Objectives;

/// The exit status of every command, for `--help` and the man page.
pub const EXIT_STATUS: &str = "Exit status:
  0    success; with --slo, every objective met
  1    an objective broken (--slo), or a later Run significantly slower
       (compare --fail-if-slower)
  2    bad input: a malformed flag or objective, an unreachable URL, an unreadable
       file; nothing was loaded
  3    the evidence cannot be trusted, judged before the objectives (with --slo, and
       compare --fail-if-slower): the load generator saturated, another process busy
       on the machine, a segment missing from a merged load; one line says why
       (with --judge-untrusted the objectives decide 0 or 1, the reason a warning)
  4    run --abort-if-behind: the open-loop load fell behind its schedule by more
       than the bound and was stopped; the results until then are reported, with
       when, the rates and the watch's verdict on one line
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM: the numbers until then are
       reported, nothing is judged";

/// Exit status 3: the evidence cannot be trusted.
pub const UNTRUSTED: u8 = 3;
/// Exit status 4: `run --abort-if-behind` stopped a load that fell behind its schedule.
pub const BEHIND: u8 = 4;

#[derive(Args, Debug, Clone, Default)]
pub struct CiFlags {
    /// Objectives judged on the Run, comma-separated: latency percentiles, mean and
    /// max under a bound ('p99<200ms', 'p99.9<=1s', 'mean<20ms'), errors (failed and
    /// non-2xx/3xx requests) as a share or a count ('errors<0.1%', 'errors<10'),
    /// 'non2xx<1%', a rate floor ('rps>1000'). Exit 1 when one is broken, 3 when the
    /// evidence cannot be trusted to judge them (see EXIT STATUS).
    #[arg(long, value_parser = Objectives::parse, value_name = "OBJECTIVES")]
    pub slo: Option<Objectives>,
    /// Judge the objectives even when the evidence cannot be trusted (a shared runner
    /// whose other jobs the gate would refuse): exit 1 or 0 by the objectives instead
    /// of 3, with the reason still said on stderr, in the Run and in every view (its
    /// JUnit evidence testcase skipped, not an error).
    #[arg(long = "judge-untrusted", requires = "slo")]
    pub judge_untrusted: bool,
    /// Write a JUnit XML report to FILE: a testcase per objective and per bottleneck
    /// finding.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write a Markdown summary (headline numbers, objectives, findings) to FILE; also
    /// appended to $GITHUB_STEP_SUMMARY when that is set.
    #[arg(long = "summary-md", value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
    /// Write the latency as an HdrHistogram interval log to FILE: one interval per
    /// second (µs), for HistogramLogProcessor and HdrHistogram's plotters.
    #[arg(long = "hdr-log", value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Write the headline numbers, objectives and trust as OpenMetrics text to FILE
    /// (node_exporter's textfile collector, a Pushgateway).
    #[arg(long, value_name = "FILE")]
    pub openmetrics: Option<PathBuf>,
}

/// `$GITHUB_STEP_SUMMARY`, when set and not empty.
fn step_summary() -> Option<PathBuf> {
    std::env::var_os("GITHUB_STEP_SUMMARY")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

impl CiFlags {
    /// The files asked for, each checked writable now (before any load). A summary
    /// asked for into `$GITHUB_STEP_SUMMARY` itself is appended there once, not
    /// overwritten.
    pub fn outputs(&self) -> anyhow::Result<Vec<Output<Run>>> {
        let mut out: Vec<Output<Run>> = Vec::new();
        let file = |p: &Option<PathBuf>, what: &str| -> anyhow::Result<Option<Dest>> {
            let Some(p) = p else { return Ok(None) };
            let d = Dest::File(p.clone());
            d.check(what)?;
            Ok(Some(d))
        };
        if let Some(d) = file(&self.junit, "JUnit")? {
            out.push(Output::new(Junit, d));
        }
        let summary = self
            .summary_md
            .as_ref()
            .filter(|p| step_summary().is_none_or(|s| !same_file(p, &s)));
        if let Some(d) = file(&summary.cloned(), "Markdown summary")? {
            out.push(Output::new(Markdown, d));
        }
        if let Some(d) = file(&self.hdr_log, "HdrHistogram log")? {
            out.push(Output::new(HdrLog, d));
        }
        if let Some(d) = file(&self.openmetrics, "OpenMetrics")? {
            out.push(Output::new(OpenMetrics, d));
        }
        Ok(out)
    }

    /// Judges the objectives and the evidence, keeping both in the Run (before its
    /// views are written). Nothing without `--slo`.
    pub fn judge(&self, run: &mut Run) {
        if let Some(o) = &self.slo {
            gate::judge(run, o, self.judge_untrusted);
        }
    }

    /// After the views: the summary appended to `$GITHUB_STEP_SUMMARY`, one line on
    /// stderr for a broken objective or evidence that cannot be trusted, and the exit
    /// status (an interrupted run keeps its signal's: 143 for SIGTERM, else 130).
    pub fn finish(&self, run: &Run) -> anyhow::Result<ExitCode> {
        if self.summary_md.is_some() {
            if let Some(p) = step_summary() {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&p)
                    .with_context(|| {
                        format!("cannot append to $GITHUB_STEP_SUMMARY ({})", p.display())
                    })?;
                f.write_all(markdown::summary(run).as_bytes())?;
            }
        }
        if let Some(sig) = &run.interrupted {
            return Ok(ExitCode::from(if sig == "SIGTERM" { 143 } else { 130 }));
        }
        let verdict = gate::verdict(run);
        if verdict != Verdict::Untrusted {
            // Judged anyway: the doubt is still said, first.
            if let Some(line) = objectives::untrusted_line(run) {
                eprintln!("loadlens: warning: {line}");
            }
        }
        Ok(match verdict {
            Verdict::Untrusted => {
                eprintln!(
                    "loadlens: {}",
                    objectives::untrusted_line(run).unwrap_or_default()
                );
                ExitCode::from(UNTRUSTED)
            }
            Verdict::Broken => {
                let broken: Vec<String> = run
                    .objectives
                    .iter()
                    .filter(|o| !o.met)
                    .map(|o| format!("{} ({} was {})", o.objective, o.metric, o.measured_text()))
                    .collect();
                eprintln!("loadlens: objectives broken: {}", broken.join(", "));
                ExitCode::from(1)
            }
            Verdict::Met => ExitCode::SUCCESS,
        })
    }
}
