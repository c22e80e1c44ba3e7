//! What a lab scenario is: the published setup's fault and fix, the finding it must
//! produce, the counter that shows it, and what a built world hands the load run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::world::{World, SERVER_IP};
use crate::run::Run;

/// What a built world needs from the load run.
pub struct Setup {
    pub url: String,
    /// Flags for `loadlens run` (besides the URL, duration and what to watch).
    pub args: Vec<String>,
    /// Server processes to watch (masters; their children come along).
    pub server_pids: Vec<i32>,
    /// Runs loadlens under this command (e.g. `taskset -c 0`).
    pub client_prefix: Vec<String>,
    /// Runs loadlens in this CPU cgroup (its `cgroup.procs`, from `World::cpu_quota`).
    pub client_cgroup: Option<std::path::PathBuf>,
    /// Something running beside the load (a CPU hog's stopper, a stall injector),
    /// stopped when dropped.
    pub beside: Option<Beside>,
}

impl Setup {
    /// Load `url` with `args`, watching `server_pids`; nothing beside, no prefix.
    pub fn new(url: String, load_args: &[&str], server_pids: Vec<i32>) -> Setup {
        Setup {
            url,
            args: args(load_args),
            server_pids,
            beside: None,
            client_prefix: Vec::new(),
            client_cgroup: None,
        }
    }

    /// [`Setup::new`] for a scenario whose fault one run tells apart: `--no-probe`
    /// (the run sends only its load: a probe at 4× the connections is seconds more for
    /// the lab's tests and no evidence the fault needs), unless `load_args` ask for
    /// `--probe`.
    pub fn unprobed(url: String, load_args: &[&str], server_pids: Vec<i32>) -> Setup {
        let mut s = Setup::new(url, load_args, server_pids);
        if !s.args.iter().any(|a| a == "--probe") {
            s.args.push("--no-probe".into());
        }
        s
    }
}

/// A background activity for the length of the run.
pub struct Beside {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Beside {
    pub fn every(period: Duration, f: impl Fn() + Send + 'static) -> Beside {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(period);
                if !s.load(Ordering::Relaxed) {
                    f();
                }
            }
        });
        Beside {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A lab scenario.
pub struct Scenario {
    pub name: &'static str,
    pub summary: &'static str,
    /// Where the setup and numbers come from.
    pub source: &'static str,
    pub fault: &'static str,
    pub fix: &'static str,
    /// The finding the diagnosis is expected to name (issue: diagnose).
    pub expected_finding: &'static str,
    /// The counter that shows the fault, for the before/after table.
    pub key: Key,
    pub build: fn(&mut World, bool) -> anyhow::Result<Setup>,
}

/// A scenario's key counter: its label, how to read it from a Run, and how far the fix
/// must move it for the fault to count as decisive.
pub struct Key {
    pub label: &'static str,
    pub read: fn(&Run) -> Option<f64>,
    pub moves: Moves,
}

/// How far the fix must move a scenario's key, at least. A fault that moves its key
/// less than this on a machine did not hold there: the diagnosis of that run says
/// nothing about the rules (a weak fault fails as "fault too weak", not as a wrong
/// diagnosis). The factors are set well inside what the lab measured on a 2-core
/// machine (see each scenario).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Moves {
    /// A counter of the fault: before > 0 and after ≤ before ÷ factor.
    Down(f64),
    /// A rate the fault held down: after ≥ before × factor, before > 0.
    Up(f64),
    /// No margin: the control (nothing to fix), or a fault whose fix does not remove
    /// its key (conn-per-request: every request still opens a connection).
    Holds,
}

impl Key {
    /// Whether the fault held: `Ok` with the factor it moved by, or `Err` saying why not.
    pub fn margin(&self, before: &Run, after: &Run) -> Result<Option<f64>, String> {
        let (b, a) = ((self.read)(before), (self.read)(after));
        let (factor, down) = match self.moves {
            Moves::Holds => return Ok(None),
            Moves::Down(f) => (f, true),
            Moves::Up(f) => (f, false),
        };
        let (Some(b), Some(a)) = (b, a) else {
            return Err(format!("fault too weak: {} not measured", self.label));
        };
        let moved = if down { b / a.max(0.0) } else { a / b };
        let want = if down { "÷" } else { "×" };
        if b > 0.0 && moved >= factor {
            Ok(Some(moved))
        } else {
            Err(format!(
                "fault too weak: {} {} before, {} after the fix (want {want}{factor} at least)",
                self.label,
                fmt_value(b),
                fmt_value(a)
            ))
        }
    }
}

/// A key's value for a table: whole numbers without decimals.
pub fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Owned strings from a list of flags.
pub fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The port the front server listens on in every scenario.
pub(super) const PORT: u16 = 8080;

/// The URL of `path` on the server host's port.
pub(super) fn url(path: &str) -> String {
    format!("http://{SERVER_IP}:{PORT}{path}")
}

/// The front server's `address:port`.
pub(super) fn listen() -> String {
    format!("{SERVER_IP}:{PORT}")
}

/// A window counter (`TcpExt.ListenOverflows`) from the Run's evidence.
pub(super) fn counter(run: &Run, key: &str) -> Option<f64> {
    let e = run.evidence.as_ref()?;
    Some(e.window.counters.get(key).copied().unwrap_or(0) as f64)
}
