//! `loadlens merge A.json B.json …`: segment Runs (`run --segment I/N`) → the Run of the
//! whole load, diagnosed again and shown like any Run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::compare::read_run;
use crate::merge::{merge, Part};
use crate::report::{self, Dest, Json, Output, Text};
use crate::run::{Evidence, Run};

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Segment Runs written by `loadlens run … --segment I/N --json FILE`.
    #[arg(required = true, value_name = "RUN.json")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    out: ViewArgs,
    #[command(flatten)]
    save: super::history::SaveFlags,
}

/// The views of a Run made from saved parts (`merge`, `attach`).
#[derive(Args, Debug)]
pub(super) struct ViewArgs {
    /// Write the Run as JSON to FILE (`-` = stdout, which silences the text).
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Write the Run as a self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Print the latency percentiles and details.
    #[arg(long)]
    latency: bool,
    #[command(flatten)]
    ci: super::ci::CiFlags,
}

impl ViewArgs {
    /// The views asked for, checked before anything is read.
    pub(super) fn views(&self) -> anyhow::Result<Views> {
        Views::new(
            self.json.as_deref(),
            self.html.as_deref(),
            self.latency,
            false,
            &self.ci,
        )
    }
}

/// Where a merged Run goes: the views chosen by flag, checked before anything is read.
pub(super) struct Views {
    outputs: Vec<Output<Run>>,
    ci: super::ci::CiFlags,
    /// `--save`: where the Run is kept.
    save: Option<super::history::Saver>,
}

impl Views {
    pub(super) fn new(
        json: Option<&str>,
        html: Option<&std::path::Path>,
        latency: bool,
        quiet: bool,
        ci: &super::ci::CiFlags,
    ) -> anyhow::Result<Views> {
        let json = json.map(Dest::parse);
        if let Some(d) = &json {
            d.check("JSON")?;
        }
        let text = !quiet && json != Some(Dest::Stdout);
        let mut outputs: Vec<Output<Run>> = Vec::new();
        outputs.extend(json.map(|d| Output::new(Json, d)));
        outputs.extend(report::html_output(html)?);
        outputs.extend(ci.outputs()?);
        if text {
            outputs.push(Output::new(Text { latency }, Dest::Stdout));
        }
        Ok(Views {
            outputs,
            ci: ci.clone(),
            save: None,
        })
    }

    /// Keeps the Run in the history database too.
    pub(super) fn saving(mut self, save: Option<super::history::Saver>) -> Views {
        self.save = save;
        self
    }

    /// Merges the parts, diagnoses and judges the sum, writes the views and returns the
    /// exit status (see [`super::ci::CiFlags::finish`]). `server`: evidence watched on
    /// the server's machine (and its host), which replaces the segments' own.
    pub(super) fn merge_and_write(
        &self,
        parts: Vec<Part>,
        reasons: &BTreeMap<u32, String>,
        server: Option<(Evidence, String)>,
        warnings: Vec<String>,
    ) -> anyhow::Result<ExitCode> {
        let mut run = merge(parts, reasons)?;
        if let Some((mut evidence, host)) = server {
            // Placed on the load's time line by the Ray companion already.
            evidence.started_unix_s = None;
            run.warnings
                .retain(|w| !w.starts_with("the machine evidence is "));
            run.warnings.push(format!(
                "the machine evidence is the server's node's ({host})"
            ));
            run.evidence = Some(evidence);
        }
        run.warnings.extend(warnings);
        self.write(run)
    }

    /// Diagnoses and judges `run` again, writes the views, returns the exit status.
    pub(super) fn write(&self, mut run: Run) -> anyhow::Result<ExitCode> {
        run.findings = crate::diagnose::diagnose(&run);
        self.ci.judge(&mut run);
        report::write_all(&run, &self.outputs)?;
        if let Some(s) = &self.save {
            s.save(&run)?;
        }
        self.ci.finish(&run)
    }
}

pub fn cmd(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let views = a.out.views()?.saving(a.save.open()?);
    let mut parts = Vec::new();
    for f in &a.files {
        parts.push(Part {
            name: f.display().to_string(),
            run: read_run(f)?,
        });
    }
    views.merge_and_write(parts, &BTreeMap::new(), None, Vec::new())
}
