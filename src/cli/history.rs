//! `run --save [NAME]` (and `merge`, `report`): a Run kept in the history database;
//! `loadlens history NAME`: its series and change points; `history export`, `history
//! import`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::history::{self, changepoint::Options, Analysis, Db, Entry, Machine, Origin};
use crate::run::Run;
use crate::units::{fmt_count, fmt_us};

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
    /// The seed of the permutations (the same seed, the same change points).
    #[arg(long, default_value = "1")]
    seed: u64,
    /// Print the series and change points as JSON.
    #[arg(long)]
    json: bool,
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
    let db = Db::open(&db_path(&a.db)?)?;
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
        ..Options::default()
    };
    let an = history::analyse(&name, entries, a.all_machines, &o);
    let failing = a.fail_on_regression && !an.newest_regressions(a.threshold).is_empty();
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

fn short(m: history::Metric) -> &'static str {
    use history::Metric::*;
    match m {
        RequestsPerS => "req/s",
        P50Us => "p50",
        P99Us => "p99",
        MaxUs => "max",
        Errors => "errors",
        ServerCpuUsPerRequest => "cpu/req",
    }
}

fn show(m: history::Metric, v: f64) -> String {
    use history::Metric::*;
    match m {
        RequestsPerS => format!("{} req/s", fmt_count(v.round())),
        Errors => format!("{v:.1}"),
        _ => fmt_us(v),
    }
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
