//! The watch protocol: what `loadlens run --watch ssh://…` and `loadlens watch --stdio`
//! say to each other over the SSH channel's standard input and output.
//!
//! Framing: one JSON object per line (UTF-8, `\n`-terminated; serde_json never writes a
//! raw newline inside a value), tagged by `"type"`. JSON lines rather than
//! length-prefixed frames because the channel also carries the shell's own lines
//! before the watch starts (the bootstrap marker, a login banner a careless `.bashrc`
//! prints), which a reader skips by their first byte; the Evidence, the only large
//! message, is a few hundred KiB even with a profile.
//!
//! The exchange, the client always speaking first:
//!
//! ```text
//! client → {"type":"hello","protocol":1,"version":"0.1.0"}
//! server ← {"type":"hello","protocol":1,"version":"0.1.0","hostname":"web1","arch":"x86_64"}
//!          (or {"type":"refused","reason":"…"} and the server exits: versions differ,
//!           no /proc)
//! client → {"type":"clock","t0":…}            ×N, before the load (NTP's four times)
//! server ← {"type":"clock","t0":…,"t1":…,"t2":…}
//! client → {"type":"start","target":"10.0.0.2:80","sample_s":1.0,"profile_hz":null,…}
//! server ← {"type":"started","at_unix_s":…,"found":{…}}   (the `before` snapshot is
//!          taken; what was found to watch)
//!          … the load runs …
//! server ← {"type":"sample","sample":{…}}      each sample as it is taken
//! client → {"type":"stop"}
//! server ← {"type":"evidence","evidence":{…},"cpu_pct":…,"cpu_s":…}
//!          (its `samples` are those not already sent: the last, partial one)
//! client → {"type":"clock",…}                 ×N, after the load
//!          start/stop again for the next repetition, or standard input closes:
//!          the server finishes any watch and exits.
//! ```
//!
//! `loadlens tune --watch ssh://` changes the server's config through the same channel,
//! between loads, one request at a time (protocol 3):
//!
//! ```text
//! client → {"type":"tune","op":{"do":"config_file","kind":"nginx","pid":812}}
//! server ← {"type":"tuned","text":"/etc/nginx/nginx.conf","paths":[]}
//! client → {"type":"tune","op":{"do":"hold","kind":"nginx","pid":812,"path":"/etc/nginx/nginx.conf"}}
//!          (the file locked there and its original backed up beside the lock; only a
//!           held file — one of that server's own config files — is ever written)
//! client → {"type":"tune","op":{"do":"write","path":"…","text":"…"}}   the new text
//! client → {"type":"tune","op":{"do":"test","kind":"nginx","pid":812,"file":"…"}}
//! client → {"type":"tune","op":{"do":"reload","kind":"nginx","pid":812}}
//! server ← {"type":"tuned",…} or {"type":"error","message":"the config test failed: …"}
//! client → {"type":"tune","op":{"do":"release"}}   the locks let go; where the
//!          backups of changed files are kept
//! ```
//!
//! The channel closing with files held releases their locks (the server's process
//! ends); putting a change back is the client's, which keeps the channel open for it
//! through Ctrl-C and SIGTERM (ssh runs in a process group of its own).
//!
//! The samples come as they are taken so that a channel lost mid-run (the server's
//! sshd restarted, the network gone) still leaves the Run the server's evidence up to
//! then; the window's deltas, the logs and the profile come only with the stop.
//!
//! A version mismatch is refused in the hello, before any load: the Evidence is
//! serde's layout of this build's structs, so the two ends must be the same loadlens
//! (the cache on the server is named by version and hash, so they normally are).

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::run::{Evidence, Sample, ServerKind};
use crate::watch::Found;

/// Version of the messages below; a change that an older peer would misread bumps it.
pub const PROTOCOL: u32 = 3;
/// This build's version, as the hello carries it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The bootstrap script's line when the cached binary is missing (see `ssh.rs`).
pub const MISSING: &str = "loadlens-bootstrap: missing";

// The limits on what one side reads from the other (#46): every line is read through
// `bounded::LineReader` with one of them, so a broken login script or a hostile host
// costs loadlens at most that much memory, and ends the session with an error naming
// the limit. Measured on a loopback run (`run -c 4 -d 5s --profile --watch ssh://…`
// through an `--ssh-command` that tees the channel; nginx, 2 CPUs, 3 processes): hello
// 79 B, clock 88 B, started 1.5 KiB, a sample 3.3 KiB, the Evidence with its profile
// 27 KiB; the bootstrap's marker 34 B; the client's start 150 B. Each limit leaves a
// wide margin over the largest a real server makes.

/// The longest message from the server. The Evidence is the largest: 27 KiB measured;
/// its profile is bounded (4000 stacks of at most 127 frame indexes, ~3 MiB, plus the
/// frame names) and so are its off-CPU stalls (1000): a few MiB at worst, a profile of
/// a JVM with deep stacks included. 32 MiB is ten times that.
pub const MAX_MESSAGE: usize = 32 << 20;
/// The longest sample: 3.3 KiB measured; it grows with the CPUs (~130 B each) and the
/// watched processes (~580 B each): 512 CPUs and 2000 processes make 1.2 MiB.
pub const MAX_SAMPLE: usize = 4 << 20;
/// The longest line before the hello (a login script's chatter, the bootstrap's
/// marker, the hello itself: 34 to 79 B measured; a host name is at most 64 B).
pub const MAX_EARLY_LINE: usize = 4 << 10;
/// All the bytes before the hello: a chatty `.bashrc` prints a few lines.
pub const MAX_BEFORE_HELLO: u64 = 64 << 10;
/// The longest message from the client (`watch --stdio` reads them): the start is the
/// largest, 150 B measured, growing with the `--server-name`s and pids given.
pub const MAX_REQUEST: usize = 1 << 20;
/// The largest config file `tune` reads or writes on the server: nginx.conf of a
/// large site is tens of KiB (the lab's are 1 to 3 KiB). A `write` request carries the
/// file's text as a JSON string within [`MAX_REQUEST`]; a `tuned` reply carries it
/// within [`MAX_TUNE_REPLY`].
pub const MAX_CONFIG: u64 = 512 << 10;
/// The longest `tuned` reply: a config file (at most [`MAX_CONFIG`], escaped as JSON at
/// most six bytes a byte) and a few paths.
pub const MAX_TUNE_REPLY: usize = 6 * (MAX_CONFIG as usize) + (64 << 10);
/// Samples come one per interval from the server's `before` snapshot, which is taken
/// after the client sent its start: at any moment the client has received at most
/// `elapsed / interval + 1` of them, however the network bunched them. A server that
/// sends more than twice that, plus this many, is refused (a flood far faster than
/// asked would otherwise be held in memory until the stop).
pub const SAMPLES_BEYOND_RATE: u64 = 16;

/// How many samples may have come `elapsed_s` after the start, one asked for every
/// `interval_s` (the server samples at most every 100 ms).
pub fn samples_allowed(elapsed_s: f64, interval_s: f64) -> u64 {
    (2.0 * elapsed_s.max(0.0) / interval_s.max(0.1)) as u64 + SAMPLES_BEYOND_RATE
}

/// What the client sends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToServer {
    Hello {
        protocol: u32,
        version: String,
    },
    /// NTP's originate time: the client's clock when sent, seconds since the epoch.
    Clock {
        t0: f64,
    },
    Start(StartWatch),
    Stop,
    /// One operation of `tune` on the server's machine (not while a watch runs).
    Tune {
        op: TuneOp,
    },
}

/// What `tune` asks of the server's machine: the same steps it takes on its own
/// (`kinds::live`), there.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum TuneOp {
    /// The main config file process `pid` (a server of `kind`) was started with.
    ConfigFile { kind: ServerKind, pid: i32 },
    /// The files the main one includes that hold directives too, the main one first.
    Files { kind: ServerKind, main: String },
    /// A config file's text (at most [`MAX_CONFIG`]).
    Read { path: String },
    /// Locks `path` for this session and backs it up; refused unless it is one of
    /// the config files of server `pid` and writable.
    Hold {
        kind: ServerKind,
        pid: i32,
        path: String,
    },
    /// Writes `text` over a held file, in place.
    Write { path: String, text: String },
    /// The server's own config test of `file`.
    Test {
        kind: ServerKind,
        pid: i32,
        file: String,
    },
    /// The server's graceful reload, and the wait for its new workers to settle; the
    /// reply's text is how they settled (a `run::Settle` as JSON).
    Reload { kind: ServerKind, pid: i32 },
    /// A sysctl read (`value` absent) or written in process `pid`'s network namespace.
    Sysctl {
        pid: i32,
        key: String,
        value: Option<String>,
    },
    /// Lets go of every held file: what became of each (its backup kept or removed).
    Release,
}

/// What to watch: the local `WatchSpec`'s fields, as the server needs them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StartWatch {
    /// The address the load is sent to (its port finds the server's listener).
    pub target: String,
    pub sample_s: f64,
    pub profile_hz: Option<u64>,
    /// Watch where the server's threads slept (with the profile; `--no-offcpu`).
    #[serde(default)]
    pub offcpu: bool,
    /// Without `offcpu`: sample the threads' states from `/proc` (the default).
    #[serde(default)]
    pub sampled: bool,
    #[serde(default)]
    pub server_names: Vec<String>,
    #[serde(default)]
    pub server_pids: Vec<i32>,
}

/// What the server sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToClient {
    Hello {
        protocol: u32,
        version: String,
        hostname: String,
        arch: String,
    },
    /// The hello was refused (versions, no /proc); the server exits after it.
    Refused { reason: String },
    /// NTP's receive (`t1`) and transmit (`t2`) times on the server's clock.
    Clock { t0: f64, t1: f64, t2: f64 },
    /// The watch took its `before` snapshot at this time, server's clock, and found
    /// this to watch.
    Started {
        at_unix_s: f64,
        #[serde(default)]
        found: Box<Found>,
    },
    /// One sample, as it was taken (its `t_s` on the remote watch's own time line).
    Sample { sample: Box<Sample> },
    Evidence {
        evidence: Box<Evidence>,
        /// The server's loadlens process's CPU from start to stop, percent of a core,
        /// and in seconds (user + system, every thread).
        cpu_pct: f64,
        #[serde(default)]
        cpu_s: f64,
    },
    /// A message the server could not act on (e.g. a start while watching), or a
    /// `tune` operation that failed (why).
    Error { message: String },
    /// A `tune` operation done: its text (a path, a file, a sysctl's value, notes) and
    /// paths (`files`).
    Tuned {
        #[serde(default)]
        text: String,
        #[serde(default)]
        paths: Vec<String>,
    },
}

/// Now, in seconds since the Unix epoch (the clock the exchanges compare).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Writes one message as a line and flushes it; returns the bytes written.
pub fn send<T: Serialize>(out: &mut impl Write, msg: &T) -> anyhow::Result<u64> {
    let mut line = serde_json::to_vec(msg)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()?;
    Ok(line.len() as u64)
}

/// Whether a line is a message (a JSON object), not a shell's chatter.
pub fn is_message(line: &str) -> bool {
    line.starts_with('{')
}

/// The refusal (naming both sides) when a peer's hello does not match this build.
pub fn mismatch(protocol: u32, version: &str, peer: &str) -> Option<String> {
    (protocol != PROTOCOL || version != VERSION).then(|| {
        format!(
            "loadlens versions differ: this side is loadlens {VERSION} (protocol {PROTOCOL}), the {peer} is loadlens {version} (protocol {protocol}) — run the same build on both"
        )
    })
}

/// One NTP exchange: the client sent at `t0`, the server received at `t1` and replied
/// at `t2` (its clock), the client received at `t3` (RFC 5905 §8).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSample {
    pub t0: f64,
    pub t1: f64,
    pub t2: f64,
    pub t3: f64,
}

impl ClockSample {
    /// The server's clock minus the client's, assuming the two legs take as long.
    pub fn offset_s(&self) -> f64 {
        ((self.t1 - self.t0) + (self.t2 - self.t3)) / 2.0
    }

    /// The round trip, without the server's own time between receive and reply.
    pub fn rtt_s(&self) -> f64 {
        ((self.t3 - self.t0) - (self.t2 - self.t1)).max(0.0)
    }
}

/// Of several exchanges, the one with the shortest round trip: its offset is the least
/// disturbed by queueing on either leg (NTP's clock filter keeps the same one).
pub fn best(samples: &[ClockSample]) -> Option<ClockSample> {
    samples
        .iter()
        .copied()
        .min_by(|a, b| a.rtt_s().total_cmp(&b.rtt_s()))
}

/// The offset to apply and its uncertainty from the best exchange before and after the
/// load: their mean, ± half the larger round trip plus half their difference (drift).
pub fn combine(before: ClockSample, after: ClockSample) -> (f64, f64) {
    let (a, b) = (before.offset_s(), after.offset_s());
    let offset = (a + b) / 2.0;
    let uncertainty = before.rtt_s().max(after.rtt_s()) / 2.0 + (a - b).abs() / 2.0;
    (offset, uncertainty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_and_round_trip_of_a_symmetric_exchange() {
        // Server 5 s ahead; 10 ms each way; 2 ms in the server.
        let s = ClockSample {
            t0: 100.0,
            t1: 105.010,
            t2: 105.012,
            t3: 100.022,
        };
        assert!((s.offset_s() - 5.0).abs() < 1e-9);
        assert!((s.rtt_s() - 0.020).abs() < 1e-9);
    }

    #[test]
    fn the_shortest_round_trip_wins_and_drift_widens_the_uncertainty() {
        let slow = ClockSample {
            t0: 0.0,
            t1: 1.1,
            t2: 1.1,
            t3: 0.2,
        };
        let fast = ClockSample {
            t0: 0.0,
            t1: 1.01,
            t2: 1.01,
            t3: 0.02,
        };
        assert_eq!(best(&[slow, fast]), Some(fast));
        let later = ClockSample {
            t0: 10.0,
            t1: 11.03,
            t2: 11.03,
            t3: 10.02,
        };
        let (off, unc) = combine(fast, later);
        assert!((off - 1.01).abs() < 1e-9, "{off}");
        // Half the round trip (10 ms) plus half the drift (10 ms).
        assert!((unc - 0.02).abs() < 1e-9, "{unc}");
    }

    #[test]
    fn messages_are_single_json_lines_with_a_type() {
        let mut out = Vec::new();
        send(
            &mut out,
            &ToServer::Start(StartWatch {
                target: "10.0.0.2:80".into(),
                sample_s: 1.0,
                profile_hz: Some(99),
                offcpu: true,
                sampled: true,
                server_names: vec!["a\nb".into()],
                server_pids: vec![],
            }),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches('\n').count(), 1, "{text}");
        assert!(text.starts_with("{\"type\":\"start\""), "{text}");
        let back: ToServer = serde_json::from_str(text.trim_end()).unwrap();
        assert!(matches!(back, ToServer::Start(s) if s.server_names == ["a\nb"]));
        let stop: ToServer = serde_json::from_str(r#"{"type":"stop"}"#).unwrap();
        assert_eq!(stop, ToServer::Stop);
    }

    #[test]
    fn samples_at_the_rate_asked_pass_and_a_flood_does_not() {
        // From the fastest interval the server samples at to a slow one.
        for interval_s in [0.01, 0.1, 1.0, 60.0] {
            let taken_s = f64::max(interval_s, 0.1);
            // However bunched, by `t` at most `t / taken + 1` have come.
            for k in 0..2000u32 {
                let t = f64::from(k) * taken_s / 3.0;
                let came = (t / taken_s) as u64 + 1;
                assert!(came <= samples_allowed(t, interval_s), "{interval_s} {t}");
            }
            // A flood: a thousand in the first second.
            assert!(samples_allowed(1.0, interval_s) < 1000, "{interval_s}");
        }
    }

    #[test]
    fn a_mismatch_names_both_versions() {
        assert_eq!(mismatch(PROTOCOL, VERSION, "server"), None);
        let m = mismatch(PROTOCOL, "0.0.1", "server").unwrap();
        assert!(m.contains(VERSION) && m.contains("0.0.1"), "{m}");
        assert!(mismatch(PROTOCOL + 1, VERSION, "client").is_some());
    }
}
