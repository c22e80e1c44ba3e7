//! Performance over time: Runs kept in an embedded SQLite database (`run --save`), the
//! series of a test read back, and the change points in each of its numbers
//! (`changepoint.rs`, E-divisive means as Apache Otava and MongoDB use it).
//!
//! One row per Run: the test's name, when, where (git revision and branch, `--tag`s, a
//! fingerprint of the machine), the headline numbers, the latency HdrHistogram (encoded
//! as the Run encodes it) and the trust verdict (`src/gate.rs#trust`). A Run is stored
//! once: its row carries a SHA-256 of the name and the Run's JSON, a unique key.
//!
//! Several loadlens processes may save at once (CI runners sharing a file, `xargs -P`):
//! the database is in WAL mode with a busy timeout, so a writer waits for another
//! instead of failing. The schema's version is SQLite's `user_version`; each migration
//! takes the file one version up, in a transaction.

pub mod changepoint;
mod export;
mod series;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::run::Run;

pub use export::{export, rfc3339 as export_time, Format};
pub use series::{analyse, Analysis, Metric, Shift, METRICS};

/// Migrations, in order: entry i takes `user_version` i to i + 1.
const MIGRATIONS: &[&str] = &[
    // 1: the runs.
    "CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        started_unix_s REAL NOT NULL,
        saved_unix_s REAL NOT NULL,
        git_revision TEXT,
        git_branch TEXT,
        tags TEXT NOT NULL,
        machine TEXT NOT NULL,
        cpu_model TEXT NOT NULL,
        cores INTEGER NOT NULL,
        kernel TEXT NOT NULL,
        version TEXT NOT NULL,
        requests_per_s REAL NOT NULL,
        p50_us INTEGER NOT NULL,
        p99_us INTEGER NOT NULL,
        max_us INTEGER NOT NULL,
        errors INTEGER NOT NULL,
        responses INTEGER NOT NULL,
        latency_histogram TEXT NOT NULL
    );
    CREATE INDEX runs_by_name ON runs (name, started_unix_s);",
    // 2: the server's CPU per request and the trust verdict.
    "ALTER TABLE runs ADD COLUMN server_cpu_us_per_request REAL;
     ALTER TABLE runs ADD COLUMN trusted INTEGER NOT NULL DEFAULT 1;
     ALTER TABLE runs ADD COLUMN distrust TEXT NOT NULL DEFAULT '';",
    // 3: the Run itself (its JSON), for `history show ID` and `compare` of two stored
    // Runs; NULL for Runs stored before.
    "ALTER TABLE runs ADD COLUMN run_json TEXT;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The machine a Run was measured on, as far as history compares Runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: u32,
    pub kernel: String,
    /// `loadlens X.Y.Z`.
    pub version: String,
}

impl Machine {
    /// This machine, now.
    pub fn here() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "model name").then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        Machine {
            cpu_model,
            cores,
            kernel,
            version: format!("loadlens {}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// A short fingerprint: the first 12 hex digits of the SHA-256 of the fields.
    pub fn fingerprint(&self) -> String {
        let text = format!(
            "{}\n{}\n{}\n{}",
            self.cpu_model, self.cores, self.kernel, self.version
        );
        hex(ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref())[..12].to_string()
    }
}

/// Where a Run was made: the git checkout (if the working directory is in one) and tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Origin {
    pub git_revision: Option<String>,
    pub git_branch: Option<String>,
    pub tags: BTreeMap<String, String>,
}

impl Origin {
    /// The working directory's git revision and branch (none outside a repository or
    /// without git), and the tags given.
    pub fn here(tags: BTreeMap<String, String>) -> Origin {
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .stderr(std::process::Stdio::null())
                .output()
                .ok()?;
            let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
            (out.status.success() && !s.is_empty()).then_some(s)
        };
        Origin {
            git_revision: git(&["rev-parse", "HEAD"]),
            git_branch: git(&["rev-parse", "--abbrev-ref", "HEAD"]).filter(|b| b != "HEAD"),
            tags,
        }
    }
}

/// One stored Run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub id: i64,
    /// SHA-256 of the name and the Run's JSON: the same Run is stored once.
    pub hash: String,
    pub name: String,
    pub started_unix_s: f64,
    pub saved_unix_s: f64,
    #[serde(flatten)]
    pub origin: Origin,
    /// The machine's fingerprint (`Machine::fingerprint`).
    pub machine: String,
    #[serde(flatten)]
    pub machine_facts: Machine,
    pub requests_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Failed requests (all classes).
    pub errors: u64,
    pub responses: u64,
    /// The watched server processes' CPU time per response, µs (absent without a watch).
    pub server_cpu_us_per_request: Option<f64>,
    /// The latency HdrHistogram, V2 deflate + base64 as in the Run.
    #[serde(skip)]
    pub latency_histogram: String,
    /// Whether the Run's evidence could be trusted (`src/gate.rs#trust`).
    pub trusted: bool,
    /// Why not, when not.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub distrust: String,
    /// The Run's JSON, when saving or importing (`Db::entries` leaves it out: a series
    /// needs the numbers only; `Db::run_json` reads it).
    #[serde(skip)]
    pub run_json: Option<String>,
}

impl Entry {
    /// The row for `run`, saved as `name`.
    pub fn of(run: &Run, name: &str, origin: Origin, machine: &Machine) -> Entry {
        let json = serde_json::to_string(run).expect("a Run serialises");
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(name.as_bytes());
        ctx.update(b"\n");
        ctx.update(json.as_bytes());
        let lat = &run.results.latency;
        let pct = |p: f64| {
            lat.percentiles
                .iter()
                .find(|x| x.p == p)
                .map_or(0, |x| x.us)
        };
        let trust = run.trust.clone().unwrap_or_else(|| crate::gate::trust(run));
        let server_cpu_pct: Option<f64> = run.evidence.as_ref().and_then(|e| {
            let procs = &e.window.processes;
            (!procs.is_empty()).then(|| procs.iter().map(|p| p.cpu_pct).sum())
        });
        let rps = run.results.requests_per_s;
        Entry {
            id: 0,
            hash: hex(ctx.finish().as_ref()),
            name: name.to_string(),
            started_unix_s: run.started_unix_s,
            saved_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            origin,
            machine: machine.fingerprint(),
            machine_facts: machine.clone(),
            requests_per_s: rps,
            p50_us: pct(50.0),
            p99_us: pct(99.0),
            max_us: lat.max_us,
            errors: run.results.errors.total(),
            responses: run.results.responses,
            // CPU percent of one core = centiseconds per second; per response, in µs.
            server_cpu_us_per_request: server_cpu_pct
                .filter(|_| rps > 0.0)
                .map(|pct| pct / 100.0 * 1e6 / rps),
            latency_histogram: lat.histogram.clone(),
            trusted: trust.trusted,
            distrust: trust.why(),
            run_json: Some(json),
        }
    }
}

/// The default test name of a Run: method, URL and load shape.
pub fn default_name(run: &Run) -> String {
    let s = &run.spec;
    let mut name = format!("{} {} -c {}", s.method, s.url, s.connections);
    if let Some(r) = s.rate {
        name.push_str(&format!(" -R {r}"));
    }
    if let Some(st) = &s.stages {
        name.push_str(&format!(" --stages {}", st.text()));
    } else if let Some(d) = s.duration_s {
        name.push_str(&format!(" -d {d}s"));
    }
    if let Some(n) = s.requests {
        name.push_str(&format!(" -n {n}"));
    }
    name
}

/// The database file when no `--db` is given: `$XDG_DATA_HOME/loadlens/history.db`, else
/// `~/.local/share/loadlens/history.db`.
pub fn default_path() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local/share"),
            None => anyhow::bail!(
                "no place for the history database: neither XDG_DATA_HOME nor HOME is set — give --db PATH"
            ),
        },
    };
    Ok(base.join("loadlens").join("history.db"))
}

/// An open history database.
pub struct Db {
    conn: Connection,
    path: PathBuf,
}

/// How long a writer waits for another before giving up.
const BUSY: Duration = Duration::from_secs(30);

/// Whether `e` (or what it wraps) is SQLite's "database is locked/busy".
fn is_busy(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<rusqlite::Error>()
                .and_then(rusqlite::Error::sqlite_error_code),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    })
}

impl Db {
    /// Opens (creating it and its directory if missing) and migrates the database.
    pub fn open(path: &Path) -> anyhow::Result<Db> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "cannot create {} for the history database — give --db PATH in a writable directory",
                    dir.display()
                )
            })?;
        }
        let conn = Connection::open(path).with_context(|| {
            format!(
                "cannot open the history database {} — check the path and its permissions, or give --db PATH",
                path.display()
            )
        })?;
        let db = Db {
            conn,
            path: path.to_path_buf(),
        };
        db.setup().with_context(|| {
            format!(
                "{} is not a usable loadlens history database (is it writable, and an SQLite file?)",
                path.display()
            )
        })?;
        Ok(db)
    }

    /// Sets the busy timeout, WAL and the schema. Processes opening a new file at once
    /// race for it: switching to WAL (and reading a WAL being created) can answer
    /// SQLITE_BUSY without calling the busy handler (1 run in ~15 of eight writers
    /// here), so a busy answer is tried again until [`BUSY`] has passed.
    fn setup(&self) -> anyhow::Result<()> {
        self.conn.busy_timeout(BUSY)?;
        let start = std::time::Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            // WAL: readers never block the writer, writers queue on the busy timeout.
            let step = self
                .conn
                .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
                .map_err(anyhow::Error::from)
                .and_then(|_| self.migrate());
            match step {
                Err(e) if is_busy(&e) && start.elapsed() < BUSY => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                other => return other,
            }
        }
    }

    fn version(&self) -> anyhow::Result<u32> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// Takes the schema to [`SCHEMA_VERSION`], one migration per transaction. Two
    /// processes opening a new file at once: the second waits for the first's
    /// transaction (IMMEDIATE takes the write lock first) and finds it done.
    fn migrate(&self) -> anyhow::Result<()> {
        let mut v = self.version()?;
        if v > SCHEMA_VERSION {
            anyhow::bail!(
                "{} has history schema version {v}, from a newer loadlens: this one knows up to {SCHEMA_VERSION} (upgrade loadlens)",
                self.path.display()
            );
        }
        while v < SCHEMA_VERSION {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            let step = (|| -> anyhow::Result<u32> {
                let now = self.version()?;
                if now == v {
                    self.conn.execute_batch(MIGRATIONS[v as usize])?;
                    self.conn
                        .execute_batch(&format!("PRAGMA user_version = {}", v + 1))?;
                }
                self.version()
            })();
            match step {
                Ok(next) => {
                    self.conn.execute_batch("COMMIT")?;
                    v = next;
                }
                Err(e) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    return Err(e.context(format!("migrating to schema version {}", v + 1)));
                }
            }
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores `e`; `false` when the same Run was stored already.
    pub fn save(&self, e: &Entry) -> anyhow::Result<bool> {
        let tags = serde_json::to_string(&e.origin.tags)?;
        let n = self.conn.execute(
            "INSERT OR IGNORE INTO runs (hash, name, started_unix_s, saved_unix_s, git_revision,
                git_branch, tags, machine, cpu_model, cores, kernel, version, requests_per_s,
                p50_us, p99_us, max_us, errors, responses, latency_histogram,
                server_cpu_us_per_request, trusted, distrust, run_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                ?18, ?19, ?20, ?21, ?22, ?23)",
            params![
                e.hash,
                e.name,
                e.started_unix_s,
                e.saved_unix_s,
                e.origin.git_revision,
                e.origin.git_branch,
                tags,
                e.machine,
                e.machine_facts.cpu_model,
                e.machine_facts.cores,
                e.machine_facts.kernel,
                e.machine_facts.version,
                e.requests_per_s,
                e.p50_us as i64,
                e.p99_us as i64,
                e.max_us as i64,
                e.errors as i64,
                e.responses as i64,
                e.latency_histogram,
                e.server_cpu_us_per_request,
                e.trusted,
                e.distrust,
                e.run_json,
            ],
        )?;
        Ok(n == 1)
    }

    /// The Runs saved as `name` (every name when `None`), oldest first.
    pub fn entries(&self, name: Option<&str>) -> anyhow::Result<Vec<Entry>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, hash, name, started_unix_s, saved_unix_s, git_revision, git_branch, tags,
                machine, cpu_model, cores, kernel, version, requests_per_s, p50_us, p99_us,
                max_us, errors, responses, latency_histogram, server_cpu_us_per_request,
                trusted, distrust
             FROM runs WHERE ?1 IS NULL OR name = ?1 ORDER BY started_unix_s, id",
        )?;
        let rows = stmt.query_map(params![name], |r| {
            let tags: String = r.get(7)?;
            Ok(Entry {
                id: r.get(0)?,
                hash: r.get(1)?,
                name: r.get(2)?,
                started_unix_s: r.get(3)?,
                saved_unix_s: r.get(4)?,
                origin: Origin {
                    git_revision: r.get(5)?,
                    git_branch: r.get(6)?,
                    tags: serde_json::from_str(&tags).unwrap_or_default(),
                },
                machine: r.get(8)?,
                machine_facts: Machine {
                    cpu_model: r.get(9)?,
                    cores: r.get(10)?,
                    kernel: r.get(11)?,
                    version: r.get(12)?,
                },
                requests_per_s: r.get(13)?,
                p50_us: r.get::<_, i64>(14)? as u64,
                p99_us: r.get::<_, i64>(15)? as u64,
                max_us: r.get::<_, i64>(16)? as u64,
                errors: r.get::<_, i64>(17)? as u64,
                responses: r.get::<_, i64>(18)? as u64,
                latency_histogram: r.get(19)?,
                server_cpu_us_per_request: r.get(20)?,
                trusted: r.get(21)?,
                distrust: r.get(22)?,
                run_json: None,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The names stored, with their number of Runs.
    pub fn names(&self) -> anyhow::Result<Vec<(String, u64)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT name, count(*) FROM runs GROUP BY name ORDER BY name")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Copies every Run of `other` not stored here; returns (added, already here).
    pub fn import(&self, other: &Db) -> anyhow::Result<(u64, u64)> {
        let (mut added, mut had) = (0, 0);
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        for mut e in other.entries(None)? {
            e.run_json = match other.run_json(e.id) {
                Ok(j) => j,
                Err(err) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    return Err(err);
                }
            };
            match self.save(&e) {
                Ok(true) => added += 1,
                Ok(false) => had += 1,
                Err(err) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    return Err(err);
                }
            }
        }
        self.conn.execute_batch("COMMIT")?;
        Ok((added, had))
    }

    /// The JSON of stored Run `id`: `None` when it was stored before the database kept
    /// Runs whole (schema 3); an error when there is no such Run.
    pub fn run_json(&self, id: i64) -> anyhow::Result<Option<String>> {
        self.conn
            .query_row("SELECT run_json FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no Run with id {id} in {}: `loadlens history NAME --json` lists the ids",
                    self.path.display()
                )
            })
    }

    /// Whether a Run with this hash is stored.
    pub fn has(&self, hash: &str) -> anyhow::Result<bool> {
        Ok(self
            .conn
            .query_row("SELECT 1 FROM runs WHERE hash = ?1", [hash], |_| Ok(()))
            .optional()?
            .is_some())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_schema_is_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        {
            // A version-1 file, as the first build wrote it, with one Run.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(MIGRATIONS[0]).unwrap();
            c.execute_batch("PRAGMA user_version = 1").unwrap();
            c.execute(
                "INSERT INTO runs (hash, name, started_unix_s, saved_unix_s, tags, machine,
                    cpu_model, cores, kernel, version, requests_per_s, p50_us, p99_us, max_us,
                    errors, responses, latency_histogram)
                 VALUES ('h1', 't', 1.0, 2.0, '{}', 'm', 'cpu', 2, 'k', 'v', 100.0, 1, 2, 3, 0, 10, '')",
                [],
            )
            .unwrap();
        }
        let db = Db::open(&path).unwrap();
        assert_eq!(db.version().unwrap(), SCHEMA_VERSION);
        let e = db.entries(Some("t")).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].requests_per_s, 100.0);
        assert!(e[0].trusted);
        assert_eq!(e[0].server_cpu_us_per_request, None);
        // Stored before Runs were kept whole: the numbers, no JSON.
        assert_eq!(db.run_json(e[0].id).unwrap(), None);
        assert!(db.run_json(e[0].id + 1).is_err());
        // Opening again changes nothing.
        drop(db);
        assert_eq!(Db::open(&path).unwrap().entries(None).unwrap().len(), 1);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA user_version = 99")
            .unwrap();
        let err = Db::open(&path).err().unwrap();
        assert!(format!("{err:#}").contains("newer loadlens"), "{err:#}");
    }
}
