//! Watch the machine during the run: a sampler thread reads cumulative counters and
//! gauges from /proc, /sys and netlink at a fixed interval, and a before/after snapshot
//! brackets exactly the load window, so a burst between two samples still shows in the
//! window deltas. Everything lands in [`Evidence`], part of the Run.
//!
//! Network counters are read from the server's network namespace (`/proc/PID/net/*` of
//! a server process shows that process's namespace) when the server is known, else from
//! loadlens's own. CPU counters are global. Missing sources degrade to one warning each.
//!
//! Memory: one [`Sample`] is a few KiB; at most [`MAX_SAMPLES`] are kept (1 h at
//! 100 ms, 10 h at 1 s), after which sampling continues only for the window deltas.

//!
//! Files: `sampler` (the thread), `snapshot` (reading every source), `rates` (two
//! snapshots → a sample or the window), `host` (facts read once), [`logs`] (the servers' error logs), [`profile`] (on-CPU stacks), [`discover`] (which
//! processes and sockets serve the URL), [`nginx`] (its running configuration).

pub mod configs;
pub mod discover;
pub mod doctor;
mod host;
pub mod logs;
pub mod nginx;
pub mod offcpu;
pub mod profile;
mod rates;
pub mod reached;
mod sampler;
mod snapshot;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::run::{Evidence, HostFacts, Sample, Topology};
use discover::Hints;
use sampler::sampler;

/// Samples kept in the Run; see the module doc.
pub const MAX_SAMPLES: usize = 36_000;

/// How to watch: what the user asked.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    pub interval: Duration,
    pub target: SocketAddr,
    pub hints: Hints,
    /// Profile the server processes at this many samples per second (`--profile`).
    pub profile_hz: Option<u64>,
    /// Watch the server threads' context switches: where they slept, with stacks
    /// (with `--profile`; `--no-offcpu` turns it off).
    pub offcpu: bool,
    /// Without `offcpu`: sample the server threads' states, calls and wait channels
    /// from `/proc` (`offcpu::sampled`, held to ≤ 1% of a core), so every run knows
    /// where the server's time went (on by default; `--no-offcpu` turns it off).
    pub sampled: bool,
}

/// What the watch found before the load, known once it started: a remote watch sends
/// it ahead (with each sample as it is taken), so a channel lost mid-run still leaves
/// the Run knowing what was watched.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Found {
    pub topology: Topology,
    pub host: HostFacts,
    pub warnings: Vec<String>,
}

/// A running watch: the sampler thread and what it needs to finish.
pub struct Watch {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Evidence>,
    found: Found,
}

impl Watch {
    /// Starts the sampler thread, which joins the server's network namespace when it
    /// has its own, discovers the target and takes the `before` snapshot; returns once
    /// that is done. Call right before the load starts; [`Watch::finish`] right after.
    pub fn start(spec: WatchSpec) -> Watch {
        Watch::start_live(spec, None)
    }

    /// [`Watch::start`], sending a copy of each sample to `live` as it is taken (the
    /// final, partial one excepted: it is in the Evidence only).
    pub fn start_live(spec: WatchSpec, live: Option<mpsc::Sender<Sample>>) -> Watch {
        let (tx, rx) = mpsc::channel::<()>();
        let (ready_tx, ready_rx) = mpsc::channel::<Found>();
        let thread = std::thread::Builder::new()
            .name("loadlens-watch".into())
            .spawn(move || sampler(spec, rx, ready_tx, live))
            .expect("cannot start the sampler thread");
        // The thread signals (or, if it died, drops the sender) once `before` is taken.
        let found = ready_rx.recv().unwrap_or_default();
        Watch {
            stop: tx,
            thread,
            found,
        }
    }

    /// What was found to watch (the topology, the host's facts, set-up warnings).
    pub fn found(&self) -> &Found {
        &self.found
    }

    /// Stops sampling, takes the `after` snapshot and returns the evidence.
    pub fn finish(self) -> Evidence {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}
