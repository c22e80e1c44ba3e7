//! `loadlens watch --stdio`: the server's side of the watch protocol. The same local
//! watch (`Watch`) the client runs on its own machine, driven by messages on standard
//! input, its Evidence written on standard output.
//!
//! It never outlives its client: when standard input closes (ssh's channel closed, the
//! client exited or was killed) it finishes any watch and exits; `max_duration` bounds
//! it even if the channel stays open but silent. What the client sends is read within
//! `protocol::MAX_REQUEST` a line (`bounded::LineReader`), and at most [`QUEUE`]
//! messages wait for the loop (a client that sends without reading the replies is
//! held back by the pipe, not queued): a longer line, or one that is not UTF-8, ends
//! the session with an error naming it (exit 2).

use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::bounded::{read_file, LineError, LineReader, Size};
use super::protocol::unix_now;
use super::protocol::{
    self, ToClient, ToServer, TuneOp, MAX_CONFIG, MAX_REQUEST, PROTOCOL, VERSION,
};
use crate::kinds::{self, live, live::Held};
use crate::run::{Sample, ServerKind};
use crate::watch::discover::Hints;
use crate::watch::{Watch, WatchSpec};

/// What the reader thread and the sample forwarder hand the loop.
enum Input {
    Msg(ToServer),
    Bad(String),
    /// A line past the limit, or not UTF-8: where the next one starts is unknown.
    Broken(String),
    Closed,
    /// A sample of the watch numbered so (a late one of an earlier watch is dropped).
    Sample(u64, Box<Sample>),
}

/// How the session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Standard input closed (the normal end).
    Closed,
    /// `max_duration` passed with the channel still open.
    TimedOut,
    /// The hello was refused (versions, no /proc): nothing was watched.
    Refused,
    /// The client sent a line past the limit, or not UTF-8: why.
    Broken(String),
}

/// Messages read and not yet handled (the reader waits when the loop is behind).
pub const QUEUE: usize = 16;

/// Serves one client on standard input/output until it closes them.
pub fn serve(max_duration: Duration) -> anyhow::Result<Ended> {
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    let samples_tx = tx.clone();
    // The reader is a thread so the loop can bound its waits; it ends with stdin.
    std::thread::spawn(move || {
        let mut input = LineReader::new(BufReader::new(std::io::stdin().lock()), MAX_REQUEST);
        loop {
            let msg = match input.next_line() {
                Ok(Some(line)) => match serde_json::from_str::<ToServer>(&line) {
                    Ok(m) => Input::Msg(m),
                    Err(e) => Input::Bad(format!("not a message ({e}): {line:.80}")),
                },
                Ok(None) | Err(LineError::Io(_)) => Input::Closed,
                Err(e) => Input::Broken(format!(
                    "the client sent {e} (the limit of one message; the largest, the start, is a few hundred bytes): the watch ended"
                )),
            };
            let closed = matches!(msg, Input::Closed | Input::Broken(_));
            if tx.send(msg).is_err() || closed {
                return;
            }
        }
    });
    let mut out = std::io::stdout().lock();
    let deadline = Instant::now() + max_duration;
    let mut greeted = false;
    let mut watching: Option<(Watch, ProcessCpu)> = None;
    // The config files a tune over ssh holds: released (their locks let go) when the
    // session ends, however it ends.
    let mut held = Held::default();
    // Which watch this is, and how many of its samples went out as they were taken.
    let (mut generation, mut sent) = (0u64, 0usize);
    let ended = loop {
        let input = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(i) => i,
            Err(RecvTimeoutError::Timeout) => break Ended::TimedOut,
            Err(RecvTimeoutError::Disconnected) => break Ended::Closed,
        };
        let reply = match input {
            Input::Closed => break Ended::Closed,
            Input::Broken(why) => {
                // Said to the client too, if it still reads.
                let _ = protocol::send(
                    &mut out,
                    &ToClient::Error {
                        message: why.clone(),
                    },
                );
                break Ended::Broken(why);
            }
            Input::Sample(g, sample) if g == generation && watching.is_some() => {
                sent += 1;
                ToClient::Sample { sample }
            }
            Input::Sample(..) => continue,
            Input::Bad(message) => ToClient::Error { message },
            Input::Msg(ToServer::Hello { protocol, version }) => {
                if let Some(reason) = refusal(protocol, &version) {
                    protocol::send(&mut out, &ToClient::Refused { reason })?;
                    break Ended::Refused;
                }
                greeted = true;
                ToClient::Hello {
                    protocol: PROTOCOL,
                    version: VERSION.into(),
                    hostname: hostname(),
                    arch: machine(),
                }
            }
            Input::Msg(_) if !greeted => {
                let reason = "the first message must be a hello".to_string();
                protocol::send(&mut out, &ToClient::Refused { reason })?;
                break Ended::Refused;
            }
            Input::Msg(ToServer::Clock { t0 }) => {
                let t1 = unix_now();
                ToClient::Clock {
                    t0,
                    t1,
                    t2: unix_now(),
                }
            }
            Input::Msg(ToServer::Start(_)) if watching.is_some() => ToClient::Error {
                message: "a watch is already running: stop it first".into(),
            },
            Input::Msg(ToServer::Start(s)) => match s.target.parse::<SocketAddr>() {
                Ok(target) => {
                    let cpu = ProcessCpu::now();
                    generation += 1;
                    sent = 0;
                    let (live, taken) = mpsc::channel::<Sample>();
                    let (g, to_loop) = (generation, samples_tx.clone());
                    // Ends when the sampler drops `live`, at the watch's finish.
                    std::thread::spawn(move || {
                        for s in taken {
                            if to_loop.send(Input::Sample(g, Box::new(s))).is_err() {
                                return;
                            }
                        }
                    });
                    let watch = Watch::start_live(
                        WatchSpec {
                            interval: Duration::from_secs_f64(s.sample_s.max(0.1)),
                            target,
                            hints: Hints {
                                pids: s.server_pids,
                                names: s.server_names,
                            },
                            profile_hz: s.profile_hz,
                            offcpu: s.offcpu,
                            sampled: s.sampled,
                        },
                        Some(live),
                    );
                    // `start` returns once the `before` snapshot is taken.
                    let at_unix_s = unix_now();
                    let found = Box::new(watch.found().clone());
                    watching = Some((watch, cpu));
                    ToClient::Started { at_unix_s, found }
                }
                Err(e) => ToClient::Error {
                    message: format!("bad target address `{}`: {e}", s.target),
                },
            },
            Input::Msg(ToServer::Tune { .. }) if watching.is_some() => ToClient::Error {
                message: "tune's changes wait for the watch to stop".into(),
            },
            Input::Msg(ToServer::Tune { op }) => match tune(&mut held, op) {
                Ok((text, paths)) => ToClient::Tuned { text, paths },
                Err(e) => ToClient::Error {
                    message: format!("{e:#}"),
                },
            },
            Input::Msg(ToServer::Stop) => match watching.take() {
                Some((watch, cpu)) => {
                    let mut evidence = watch.finish();
                    let (cpu_pct, cpu_s) = cpu.since();
                    // The client has those already: only the rest (the partial last).
                    evidence.samples.drain(..sent.min(evidence.samples.len()));
                    ToClient::Evidence {
                        evidence: Box::new(evidence),
                        cpu_pct,
                        cpu_s,
                    }
                }
                None => ToClient::Error {
                    message: "stop without a start".into(),
                },
            },
        };
        // A closed channel ends the session like a closed stdin.
        if protocol::send(&mut out, &reply).is_err() {
            break Ended::Closed;
        }
    };
    // The sampler and the profiler's threads end with the watch, not with the process.
    if let Some((watch, _)) = watching {
        drop(watch.finish());
    }
    let _ = out.flush();
    Ok(ended)
}

/// One of `tune`'s operations on this machine (`kinds::live`, as `tune` does them on
/// its own): the reply's text and paths.
fn tune(held: &mut Held, op: TuneOp) -> anyhow::Result<(String, Vec<String>)> {
    let server = |k: ServerKind| {
        kinds::of(k).ok_or_else(|| anyhow::anyhow!("tune cannot change a {} server", k.name()))
    };
    let done = |text: String| Ok((text, Vec::new()));
    match op {
        TuneOp::ConfigFile { kind, pid } => {
            done(server(kind)?.config_file(pid)?.display().to_string())
        }
        TuneOp::Files { kind, main } => Ok((
            String::new(),
            server(kind)?
                .files(Path::new(&main))
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
        )),
        TuneOp::Read { path } => done(read_file(Path::new(&path), MAX_CONFIG).map_err(|e| {
            anyhow::anyhow!(
                "{e} (tune reads config files of at most {})",
                Size(MAX_CONFIG)
            )
        })?),
        TuneOp::Hold { kind, pid, path } => {
            held.hold(server(kind)?, pid, Path::new(&path))?;
            done(String::new())
        }
        TuneOp::Write { path, text } => {
            held.write(Path::new(&path), text.as_bytes())?;
            done(String::new())
        }
        TuneOp::Test { kind, pid, file } => {
            live::config_test(server(kind)?, pid, Path::new(&file))?;
            done(String::new())
        }
        TuneOp::Reload { kind, pid } => {
            let settle = live::reload(server(kind)?, pid)?;
            done(serde_json::to_string(&settle)?)
        }
        TuneOp::Sysctl { pid, key, value } => done(live::sysctl(pid, &key, value.as_deref())?),
        TuneOp::Release => done(held.release().join("\n")),
    }
}

/// Why this side will not watch for that client: versions, or no /proc to read.
fn refusal(protocol: u32, version: &str) -> Option<String> {
    if let Some(m) = protocol::mismatch(protocol, version, "client") {
        return Some(format!("on {}: {m}", hostname()));
    }
    if let Err(e) = std::fs::read_to_string("/proc/stat") {
        return Some(format!(
            "cannot read /proc/stat on {} ({e}): the watch reads the machine through /proc — mount it (a container needs the host's /proc or --pid=host) or run the watch where it is readable",
            hostname()
        ));
    }
    None
}

/// This machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The machine's architecture as `uname -m` names it (the bootstrap compares them).
pub fn machine() -> String {
    // SAFETY: uname fills the struct it is given; its fields are NUL-terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return std::env::consts::ARCH.into();
    }
    let bytes: Vec<u8> = u
        .machine
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The whole process's CPU time (all threads: sampler, profiler, this loop) at a point.
struct ProcessCpu {
    cpu_s: f64,
    at: Instant,
}

impl ProcessCpu {
    fn now() -> ProcessCpu {
        ProcessCpu {
            cpu_s: process_cpu_s(),
            at: Instant::now(),
        }
    }

    /// CPU used since: percent of one core, and seconds (user + system).
    fn since(&self) -> (f64, f64) {
        let wall = self.at.elapsed().as_secs_f64();
        let used = (process_cpu_s() - self.cpu_s).max(0.0);
        if wall <= 0.0 {
            return (0.0, used);
        }
        (used / wall * 100.0, used)
    }
}

fn process_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(r.ru_utime) + tv(r.ru_stime)
}
