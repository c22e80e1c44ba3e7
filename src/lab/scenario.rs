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
        }
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

/// A scenario's key counter: its label and how to read it from a Run.
pub struct Key {
    pub label: &'static str,
    pub read: fn(&Run) -> Option<f64>,
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
