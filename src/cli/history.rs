//! `run --save [NAME]` (and `merge`, `report`): a Run kept in the history database;
//! `loadlens history NAME`: its series and change points; `history export`, `history
//! import`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use anyhow::Context as _;

use crate::history::{self, changepoint::Options, Analysis, Db, Entry, Machine, Origin};
use crate::report::history::{short, show, Gate, HistoryJunit, HistoryMarkdown};
use crate::report::{self, Dest, HistoryHtml, Output};
use crate::run::Run;
use crate::units::{fmt_count, fmt_us};

/// Whether two paths name the same file (the summary asked for into
/// `$GITHUB_STEP_SUMMARY` itself is appended once, not also overwritten).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The flags that keep a Run in the history database.
#[derive(Args, Debug, Clone, Default)]
pub struct SaveFlags {
    /// Keep the Run in the history database under NAME (default: method, URL and load
    /// shape), for `loadlens history NAME`.
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "")]
    pub save: Option<String>,
    /// The history database (default: $XDG_DATA_HOME/loadlens/history.db, else
    /// ~/.local/share/loadlens/history.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// With --save: a tag kept with the Run, KEY=VALUE (repeat for more).
    #[arg(long, value_name = "KEY=VALUE", requires = "save")]
    pub tag: Vec<String>,
}

/// An open database, ready to keep the Run when it is made.
pub struct Saver {
    db: Db,
    name: Option<String>,
    tags: BTreeMap<String, String>,
}

impl SaveFlags {
    /// Opens the database now, before any load, so a bad --db fails first. `None`
    /// without --save.
    pub fn open(&self) -> anyhow::Result<Option<Saver>> {
        let Some(name) = &self.save else {
            return Ok(None);
        };
        let mut tags = BTreeMap::new();
        for t in &self.tag {
            match t.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    tags.insert(k.to_string(), v.to_string());
                }
                _ => anyhow::bail!("--tag `{t}` is not KEY=VALUE: give e.g. --tag pr=123"),
            }
        }
        Ok(Some(Saver {
            db: Db::open(&db_path(&self.db)?)?,
            name: (!name.is_empty()).then(|| name.clone()),
            tags,
        }))
    }
}

impl Saver {
    /// Keeps `run`; says so on standard error.
    pub fn save(&self, run: &Run) -> anyhow::Result<()> {
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| history::default_name(run));
        let e = Entry::of(
            run,
            &name,
            Origin::here(self.tags.clone()),
            &Machine::here(),
        );
        let new = self.db.save(&e)?;
        eprintln!(
            "{} `{name}` in {}",
            if new { "saved as" } else { "already stored as" },
            self.db.path().display()
        );
        Ok(())
    }
}

fn db_path(db: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match db {
        Some(p) => Ok(p.clone()),
        None => history::default_path(),
    }
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HistoryArgs {
    #[command(subcommand)]
    action: Option<HistoryCommand>,
    /// The test's name as saved (`run --save NAME`); without it, the names stored.
    name: Option<String>,
    /// The history database (default: $XDG_DATA_HOME/loadlens/history.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// Compare Runs of every machine, not only those of the newest Run's machine.
    #[arg(long)]
    all_machines: bool,
    /// Exit 1 when the newest Run is in a segment that began with a regression (a change
    /// point that made a number worse by more than --threshold).
    #[arg(long)]
    fail_on_regression: bool,
    /// The change, in percent, below which a regression does not fail.
    #[arg(long, value_name = "PCT", default_value = "5")]
    threshold: f64,
    /// A change point is kept when its permutation test's p-value is below this.
    #[arg(long, value_name = "P", default_value = "0.05")]
    max_p: f64,
    /// A change point whose segments' means differ by less than this, percent, is not
    /// kept (Otava's min magnitude): pure noise splits significantly about --max-p of
    /// the time however small it is.
    #[arg(long, value_name = "PCT", default_value = "0")]
    min_change: f64,
    /// The seed of the permutations (the same seed, the same change points).
    #[arg(long, default_value = "1")]
    seed: u64,
    /// Print the series and change points as JSON.
    #[arg(long)]
    json: bool,
    /// Write the series as a self-contained HTML page to FILE: the trends of requests/s,
    /// p50/p99/max and the server's CPU per request, each change point marked and linked
    /// to the two Runs it separates.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write a JUnit XML report to FILE: a testcase per number, a failure for each
    /// regression beyond --threshold at the newest Run's segment.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a Markdown summary (the verdict, the newest Run's numbers, the change
    /// points and how to compare their Runs) to FILE; also appended to
    /// $GITHUB_STEP_SUMMARY when that is set.
    #[arg(long = "summary-md", value_name = "FILE")]
    summary_md: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum HistoryCommand {
    /// Write the stored Runs in a dashboard's format to standard output.
    Export {
        /// Only this test's Runs.
        name: Option<String>,
        /// bmf: Bencher Metric Format; gab: github-action-benchmark customSmallerIsBetter;
        /// csv: Apache Otava's CSV.
        #[arg(long, value_enum)]
        format: history::Format,
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
    },
    /// Write a stored Run's JSON (as `run --json` wrote it) to standard output, for
    /// `loadlens compare` or `loadlens report`; the ids are in `history NAME --json` and
    /// the HTML page.
    Show {
        /// The Run's id.
        id: i64,
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
    },
    /// Add the Runs of another history database (another runner's); those already here
    /// are skipped.
    Import {
        /// The other database.
        file: PathBuf,
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
    },
}

pub fn cmd(a: HistoryArgs) -> anyhow::Result<ExitCode> {
    match a.action {
        Some(HistoryCommand::Export { name, format, db }) => {
            let db = Db::open(&db_path(&db)?)?;
            let entries = db.entries(name.as_deref())?;
            if let (Some(n), true) = (&name, entries.is_empty()) {
                anyhow::bail!(
                    "no Run saved as `{n}` in {}: `loadlens history` lists the names",
                    db.path().display()
                );
            }
            out(&history::export(&entries, format))
        }
        Some(HistoryCommand::Show { id, db }) => {
            let db = Db::open(&db_path(&db)?)?;
            match db.run_json(id)? {
                Some(mut json) => {
                    json.push('\n');
                    out(&json)
                }
                None => anyhow::bail!(
                    "Run {id} in {} was stored before loadlens kept whole Runs: only its numbers are there (`history NAME --json`)",
                    db.path().display()
                ),
            }
        }
        Some(HistoryCommand::Import { file, db }) => {
            if !file.is_file() {
                anyhow::bail!(
                    "{} is not a file: give another loadlens history database",
                    file.display()
                );
            }
            let here = Db::open(&db_path(&db)?)?;
            let other = Db::open(&file)?;
            let (added, had) = here.import(&other)?;
            out(&format!(
                "{added} Runs added to {}, {had} already there\n",
                here.path().display()
            ))
        }
        None => series(a),
    }
}

fn series(a: HistoryArgs) -> anyhow::Result<ExitCode> {
    if !(a.max_p > 0.0 && a.max_p <= 1.0) {
        anyhow::bail!(
            "--max-p {} is not a p-value: give one in (0, 1], e.g. 0.05",
            a.max_p
        );
    }
    if a.threshold.is_nan() || a.threshold < 0.0 {
        anyhow::bail!(
            "--threshold {} is not a percentage: give e.g. 5",
            a.threshold
        );
    }
    if !(a.min_change.is_finite() && a.min_change >= 0.0) {
        anyhow::bail!(
            "--min-change {} is not a percentage: give e.g. 2",
            a.min_change
        );
    }
    let path = db_path(&a.db)?;
    let gate = Gate {
        db: path.display().to_string(),
        threshold_pct: a.threshold,
    };
    // The files asked for, checked writable before anything is read.
    let mut views: Vec<Output<Analysis>> = Vec::new();
    let file = |p: &Option<PathBuf>, what: &str| -> anyhow::Result<Option<Dest>> {
        let Some(p) = p else { return Ok(None) };
        let d = Dest::File(p.clone());
        d.check(what)?;
        Ok(Some(d))
    };
    if let Some(d) = file(&a.html, "HTML")? {
        views.push(Output::new(HistoryHtml(gate.clone()), d));
    }
    if let Some(d) = file(&a.junit, "JUnit")? {
        views.push(Output::new(HistoryJunit(gate.clone()), d));
    }
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let summary = a
        .summary_md
        .clone()
        .filter(|p| step_summary.as_ref().is_none_or(|s| !same_file(p, s)));
    if let Some(d) = file(&summary, "Markdown summary")? {
        views.push(Output::new(HistoryMarkdown(gate.clone()), d));
    }
    let named = a.name.is_some();
    if !named && !views.is_empty() {
        anyhow::bail!("--html, --junit and --summary-md need a test's name: `loadlens history NAME --html FILE`");
    }
    let db = Db::open(&path)?;
    let Some(name) = a.name else {
        let mut s = String::new();
        for (n, count) in db.names()? {
            let _ = writeln!(s, "{count:>6}  {n}");
        }
        if s.is_empty() {
            s = format!(
                "no Runs in {} yet: `loadlens run URL --save NAME` keeps one\n",
                db.path().display()
            );
        }
        return out(&s);
    };
    let entries = db.entries(Some(&name))?;
    if entries.is_empty() {
        anyhow::bail!(
            "no Run saved as `{name}` in {}: `loadlens history` lists the names",
            db.path().display()
        );
    }
    let o = Options {
        max_p: a.max_p,
        seed: a.seed,
        min_change_pct: a.min_change,
        ..Options::default()
    };
    let an = history::analyse(&name, entries, a.all_machines, &o);
    let failing = a.fail_on_regression && !an.newest_regressions(a.threshold).is_empty();
    report::write_all(&an, &views)?;
    if a.summary_md.is_some() {
        if let Some(p) = &step_summary {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| {
                    format!("cannot append to $GITHUB_STEP_SUMMARY ({})", p.display())
                })?;
            f.write_all(report::history::markdown(&an, &gate).as_bytes())?;
        }
    }
    if a.json {
        let mut s = serde_json::to_string_pretty(&an)?;
        s.push('\n');
        out(&s)?;
    } else {
        out(&table(&an, a.threshold, a.fail_on_regression))?;
    }
    Ok(if failing {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The series as a terminal table, the change points marked, then listed.
fn table(an: &Analysis, threshold: f64, gate: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: {} Runs", an.name, an.runs.len());
    if let Some(m) = &an.machine {
        let f = &an.runs.last().expect("a series has a Run").machine_facts;
        let _ = write!(
            s,
            "machine {m} ({}, {} cores, {})",
            f.cpu_model, f.cores, f.kernel
        );
        if an.other_machines > 0 {
            let _ = write!(
                s,
                "; {} Runs of other machines left out (--all-machines)",
                an.other_machines
            );
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "\n{:>4}  {:<20} {:<10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>9}  changes",
        "#", "time (UTC)", "revision", "req/s", "p50", "p99", "max", "errors", "cpu/req"
    );
    for (i, e) in an.runs.iter().enumerate() {
        let rev = e
            .origin
            .git_revision
            .as_deref()
            .map_or("-", |r| &r[..r.len().min(8)]);
        let time = history_time(e.started_unix_s);
        let cpu = e.server_cpu_us_per_request.map_or("-".to_string(), fmt_us);
        let marks: Vec<String> = an
            .change_points
            .iter()
            .filter(|c| c.index == i)
            .map(|c| format!("{} {:+.1}%", short(c.metric), c.change_pct))
            .collect();
        let trust = if e.trusted { "" } else { " (untrusted)" };
        let row = format!(
            "{:>4}  {:<20} {:<10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>9}  {}{trust}",
            i + 1,
            time,
            rev,
            fmt_count(e.requests_per_s.round()),
            fmt_us(e.p50_us as f64),
            fmt_us(e.p99_us as f64),
            fmt_us(e.max_us as f64),
            e.errors,
            cpu,
            marks.join(", ")
        );
        let _ = writeln!(s, "{}", row.trim_end());
    }
    if an.change_points.is_empty() {
        let _ = writeln!(s, "\nno change points (p < the --max-p given)");
    } else {
        let _ = writeln!(s, "\nchange points:");
        for c in &an.change_points {
            let _ = writeln!(
                s,
                "  {:<26} from #{:<3} {:>10} → {:<10} {:+6.1}%  p={:.3}  {}",
                c.metric.name(),
                c.index + 1,
                show(c.metric, c.mean_before),
                show(c.metric, c.mean_after),
                c.change_pct,
                c.p,
                if c.regression { "worse" } else { "better" }
            );
        }
    }
    if gate {
        let reg = an.newest_regressions(threshold);
        if reg.is_empty() {
            let _ = writeln!(
                s,
                "\nno regression beyond {threshold}% in the newest Run's segment"
            );
        } else {
            for c in reg {
                let _ = writeln!(
                    s,
                    "\nREGRESSION  {} {:+.1}% from #{} on (beyond {threshold}%)",
                    c.metric.name(),
                    c.change_pct,
                    c.index + 1
                );
            }
        }
    }
    s
}

fn history_time(unix_s: f64) -> String {
    let t = crate::history::export_time(unix_s);
    t.trim_end_matches('Z').replacen('T', " ", 1)
}

fn out(s: &str) -> anyhow::Result<ExitCode> {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes())?;
    o.flush()?;
    Ok(ExitCode::SUCCESS)
}
