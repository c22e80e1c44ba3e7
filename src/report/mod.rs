//! Views of a [`Run`]: each a renderer, none of them measures anything.
//!
//! Every view has one shape, [`View`]: a subject (a Run; later a comparison or a sweep
//! of several) in, bytes out. The command line chooses views by flag and pairs each with
//! a destination ([`Output`]); [`write_all`] renders and writes them. Adding a format
//! (HTML, Markdown, CSV) is one more `View` implementation, with no change to what
//! measures or diagnoses.
//!
//! Files: [`terminal`] (wrk's block, the text people know), [`during`] (what the machine
//! did), [`findings`] (the ranked findings), [`Json`] (the Run itself: the one artifact
//! every other view can be rendered from again, by `loadlens report`); for CI,
//! [`objectives`] (the `--slo` block), [`junit`], [`markdown`] (the summary),
//! [`hdrlog`] (HdrHistogram's interval log) and [`openmetrics`].

pub mod chart;
pub mod compare;
pub mod during;
pub mod endpoints;
pub mod findings;
pub mod flamegraph;
pub mod hdrlog;
pub mod history;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod objectives;
pub mod openmetrics;
pub mod path;
pub mod profile;
pub mod repeat;
pub mod sweep;
pub mod terminal;
pub mod time;
pub mod tune;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use crate::run::Run;
pub use html::{HistoryHtml, Html};

/// A rendering of `S` (a [`Run`], or several Runs compared).
pub trait View<S: ?Sized> {
    fn render(&self, subject: &S) -> Vec<u8>;
}

/// The subject itself as pretty JSON (a Run's layout is `docs/run.schema.json`).
pub struct Json;

impl<S: Serialize + ?Sized> View<S> for Json {
    fn render(&self, subject: &S) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(subject).expect("a record always serialises");
        v.push(b'\n');
        v
    }
}

/// The terminal block: wrk's block, the watch, the findings.
pub struct Text {
    /// Add the latency percentiles and the details.
    pub latency: bool,
}

impl View<Run> for Text {
    fn render(&self, run: &Run) -> Vec<u8> {
        terminal::render(run, self.latency).into_bytes()
    }
}

/// Where a view goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    Stdout,
    File(PathBuf),
}

impl Dest {
    /// `-` is stdout, anything else a file.
    pub fn parse(s: &str) -> Dest {
        if s == "-" {
            Dest::Stdout
        } else {
            Dest::File(PathBuf::from(s))
        }
    }

    /// Fails now, not after the load, when the file cannot be written (it is created
    /// if missing and left as it is otherwise). `what` names the format in the error.
    pub fn check(&self, what: &str) -> anyhow::Result<()> {
        if let Dest::File(p) = self {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(p)
                .with_context(|| format!("cannot write the {what} output {}", p.display()))?;
        }
        Ok(())
    }
}

/// A view and where it goes.
pub struct Output<S: ?Sized> {
    pub view: Box<dyn View<S>>,
    pub dest: Dest,
}

impl<S: ?Sized> Output<S> {
    pub fn new(view: impl View<S> + 'static, dest: Dest) -> Output<S> {
        Output {
            view: Box::new(view),
            dest,
        }
    }
}

/// The HTML page to `path`, if asked for, checked writable now (before any load).
pub fn html_output<S: ?Sized>(path: Option<&std::path::Path>) -> anyhow::Result<Option<Output<S>>>
where
    Html: View<S>,
{
    let Some(p) = path else { return Ok(None) };
    let d = Dest::File(p.to_path_buf());
    d.check("HTML")?;
    Ok(Some(Output::new(Html, d)))
}

/// Renders `subject` with each view and writes it to its destination, in order.
pub fn write_all<S: ?Sized>(subject: &S, outputs: &[Output<S>]) -> anyhow::Result<()> {
    for o in outputs {
        let bytes = o.view.render(subject);
        match &o.dest {
            Dest::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(&bytes)?;
                out.flush()?;
            }
            Dest::File(p) => {
                std::fs::write(p, bytes).with_context(|| format!("cannot write {}", p.display()))?
            }
        }
    }
    Ok(())
}
