//! The client's side of a watch over ssh: one `ssh HOST loadlens watch --stdio` kept
//! open for every load of the command (so `--repeat` and `sweep` open it once), the
//! hello and clock exchanges, a start and a stop around each load, and the Evidence it
//! returns placed on this machine's clock.
//!
//! ssh runs in its own process group: the terminal's Ctrl-C goes to loadlens alone,
//! which ends the load, asks for the evidence, then closes the channel. When loadlens
//! dies instead, the pipe to ssh's standard input closes, ssh closes the channel, and
//! the remote watch exits on its closed standard input: nothing outlives the run but
//! the cached build.
//!
//! What the server sends is read on a thread of its own within the limits of
//! `protocol` (`reader.rs`, #46). Past a limit that thread stops reading and kills
//! ssh's process group, so the remote watch sees its channel close and exits, and the
//! session fails with the limit and what was seen: before the load `open` fails (exit
//! 2), during it the channel is lost (`finish`, `lost.rs`) and the load goes on.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::protocol::unix_now;
use super::protocol::{
    self, best, combine, ClockSample, StartWatch, ToClient, ToServer, TuneOp, MISSING, PROTOCOL,
    VERSION,
};
use super::reader::{end_group, lock, wait_bounded, Incoming, Reader, Shared, UNASKED};
use super::server::machine;
use super::ssh::{build_hash, failure, upload, watch_script, Destination, Ssh};
use crate::run::{Evidence, EvidenceSource};
use crate::watch::{Found, WatchSpec};

/// Clock exchanges at each end of a load (the shortest round trip is kept).
const CLOCK_ROUNDS: usize = 8;
/// The longest wait for ssh to connect and the server to answer the hello, unless
/// `LOADLENS_HELLO_WAIT` (a duration: `30s`, `5m`) says otherwise.
const HELLO_WAIT: Duration = Duration::from_secs(120);
/// The longest wait for any other reply (discovery, `nginx -T`, the Evidence).
const REPLY_WAIT: Duration = Duration::from_secs(120);

/// An open channel to a remote watch.
pub struct Session {
    dest: Destination,
    hostname: String,
    /// `Some(bytes)` when this session copied the build to the server first.
    pub uploaded_bytes: Option<u64>,
    inner: Mutex<Channel>,
    /// The channel was lost during a load: later loads run without the remote watch.
    lost: std::sync::atomic::AtomicBool,
}

struct Channel {
    dest: Destination,
    /// Shared with the reader thread, which kills it when a limit is passed.
    child: Arc<Mutex<Child>>,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Incoming>,
    shared: Arc<Mutex<Shared>>,
    stderr: Arc<Mutex<String>>,
    hello_wait: Duration,
}

/// A watch running on the server: what finishing it needs.
pub struct Watching {
    clock_before: ClockSample,
    started_remote_unix_s: f64,
    bytes_at_start: u64,
    found: Found,
    interval_s: f64,
}

impl Session {
    /// Connects, puts this build on the server if it is not there, and exchanges the
    /// hello; every failure is one line saying why, before any load.
    /// `max_duration` bounds the remote watch whatever happens to the channel.
    pub fn open(
        destination: &str,
        ssh_command: Option<&str>,
        max_duration: Duration,
    ) -> anyhow::Result<Session> {
        let dest = Destination::parse(destination)?;
        let ssh = Ssh::new(dest.clone(), ssh_command)?;
        // The running build, even if its file was replaced since it started.
        let exe = Path::new("/proc/self/exe");
        let hash = build_hash(exe)?;
        let script = watch_script(&hash, max_duration.as_secs().max(1));
        let mut uploaded_bytes = None;
        for attempt in 0..2 {
            let mut ch = Channel::spawn(&ssh, &script)?;
            match ch.hello()? {
                Ok(hostname) => {
                    return Ok(Session {
                        dest,
                        hostname,
                        uploaded_bytes,
                        inner: Mutex::new(ch),
                        lost: std::sync::atomic::AtomicBool::new(false),
                    })
                }
                Err(arch) => {
                    ch.close();
                    let here = machine();
                    if arch != here {
                        bail!(
                            "{} is {arch} and this loadlens is built for {here}: it cannot watch there — run a loadlens built for {arch} on it (`loadlens watch --stdio` is what --watch starts)",
                            dest.host
                        );
                    }
                    if attempt > 0 {
                        bail!(
                            "loadlens was copied to {} but is not found there afterwards: are $LOADLENS_CACHE_DIR or $HOME/.cache writable and the same for every session?",
                            dest.host
                        );
                    }
                    upload(&ssh, exe, &hash)?;
                    uploaded_bytes = Some(std::fs::metadata(exe)?.len());
                }
            }
        }
        unreachable!("the second attempt returns or fails")
    }

    /// Starts the watch on the server (after measuring the clocks); returns once its
    /// `before` snapshot is taken.
    pub fn start(&self, spec: &WatchSpec) -> anyhow::Result<Watching> {
        let mut ch = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let clock_before = ch.clock()?;
        {
            let mut sh = ch.shared();
            sh.samples.clear();
            sh.watch = Some((Instant::now(), spec.interval.as_secs_f64()));
        }
        ch.send(&ToServer::Start(StartWatch {
            target: spec.target.to_string(),
            sample_s: spec.interval.as_secs_f64(),
            profile_hz: spec.profile_hz,
            offcpu: spec.offcpu,
            sampled: spec.sampled,
            server_names: spec.hints.names.clone(),
            server_pids: spec.hints.pids.clone(),
        }))?;
        match ch.reply(REPLY_WAIT)? {
            ToClient::Started { at_unix_s, found } => Ok(Watching {
                clock_before,
                started_remote_unix_s: at_unix_s,
                bytes_at_start: ch.shared().bytes,
                found: *found,
                interval_s: spec.interval.as_secs_f64(),
            }),
            other => bail!(
                "the watch on {} did not start: {}",
                self.dest.host,
                said(other)
            ),
        }
    }

    /// Stops the watch and returns its Evidence, its samples placed on this machine's
    /// clock with the load's start (`load_started_unix_s`) at 0, and its source. When
    /// the channel was lost during the load, the Evidence is what came before
    /// ([`super::lost`]) and its source says when (`lost_at_s`).
    pub fn finish(&self, w: Watching, load_started_unix_s: f64) -> Evidence {
        let mut ch = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let got = ch.send(&ToServer::Stop).and_then(|()| ch.evidence());
        // Every sample sent before the Evidence (or before the channel was lost).
        let streamed = {
            let mut sh = ch.shared();
            sh.watch = None;
            std::mem::take(&mut sh.samples)
        };
        let (mut ev, clock_after, cpu) = match got {
            Ok((mut ev, cpu_pct, cpu_s)) => {
                let rest = std::mem::replace(&mut ev.samples, streamed);
                ev.samples.extend(rest);
                // Clocks once more; a channel lost right here leaves the first alone.
                (ev, ch.clock().ok(), Some((cpu_pct, cpu_s)))
            }
            Err(e) => {
                self.lost.store(true, Ordering::Relaxed);
                let lost_unix_s = ch.shared().ended_unix_s.unwrap_or_else(unix_now);
                // A limit the server passed says more than the closed pipe it left.
                let e = match ch.shared().broke.clone() {
                    Some(why) => anyhow::anyhow!("{why}"),
                    None => e,
                };
                let lost_at_s = lost_unix_s - load_started_unix_s;
                let why = format!(
                    "the channel to the remote watch on {} was lost {lost_at_s:.1} s into the load ({e:#}): the samples until then are kept and the window rebuilt from them; the kernel counters over the window (drops, overflows, retransmits), the error logs, the profile and everything after {lost_at_s:.1} s were not seen",
                    self.dest.host
                );
                let mut ev = super::lost::evidence(w.found.clone(), streamed, w.interval_s, why);
                ev.source = Some(EvidenceSource {
                    lost_at_s: Some(lost_at_s),
                    ..EvidenceSource::default()
                });
                (ev, None, None)
            }
        };
        let bytes = ch.shared().bytes - w.bytes_at_start;
        let (offset, uncertainty) = match clock_after {
            Some(after) => combine(w.clock_before, after),
            None => (w.clock_before.offset_s(), w.clock_before.rtt_s() / 2.0),
        };
        let after = clock_after.unwrap_or(w.clock_before);
        // The remote watch's t_s = 0 on this machine's clock, relative to the load.
        let shift = (w.started_remote_unix_s - offset) - load_started_unix_s;
        for s in &mut ev.samples {
            s.t_s += shift;
        }
        if let Some(o) = &mut ev.offcpu {
            for s in &mut o.stalls {
                s.t_s += shift;
            }
        }
        // The load generator is not on that machine: its CPUs and cgroup there are the
        // watch's own, not the client's.
        ev.host.loadgen_cpus.clear();
        ev.host.cgroup_cpu_max = None;
        let window_s = match ev.source.as_ref().and_then(|s| s.lost_at_s) {
            Some(lost) => lost.max(0.0),
            None => ev.window.duration_s,
        };
        let (remote_cpu_pct, remote_cpu_s) = cpu.unwrap_or((0.0, 0.0));
        ev.source = Some(EvidenceSource {
            transport: "ssh".into(),
            destination: self.dest.text.clone(),
            hostname: self.hostname.clone(),
            remote_version: VERSION.into(),
            clock_offset_s: offset,
            clock_uncertainty_s: uncertainty,
            clock_rtt_s: [w.clock_before.rtt_s(), after.rtt_s()],
            clock_offsets_s: [w.clock_before.offset_s(), after.offset_s()],
            shift_s: shift,
            remote_cpu_pct,
            remote_cpu_s,
            bytes_received: bytes,
            bytes_per_s: if window_s > 0.0 {
                bytes as f64 / window_s
            } else {
                0.0
            },
            lost_at_s: ev.source.as_ref().and_then(|s| s.lost_at_s),
        });
        ev
    }

    /// One `tune` operation on the server's machine (between loads): the reply's text
    /// and paths, or the server's error. A config test or a reload may take a while:
    /// the wait is [`REPLY_WAIT`].
    pub fn tune(&self, op: TuneOp) -> anyhow::Result<(String, Vec<String>)> {
        let mut ch = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let msg = ToServer::Tune { op };
        let len = serde_json::to_vec(&msg)?.len();
        if len >= protocol::MAX_REQUEST {
            bail!(
                "a request of {} to {} is past the limit of {} a message: tune over ssh changes config files of at most that much",
                super::bounded::Size(len as u64),
                self.dest.host,
                super::bounded::Size(protocol::MAX_REQUEST as u64)
            );
        }
        ch.send(&msg)?;
        match ch.reply(REPLY_WAIT)? {
            ToClient::Tuned { text, paths } => Ok((text, paths)),
            ToClient::Error { message } => bail!("on {}: {message}", self.hostname),
            other => bail!("no answer from {}: {}", self.dest.host, said(other)),
        }
    }

    /// Whether the channel was lost during an earlier load (nothing more will come).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// The server's host name.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.inner
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .close();
    }
}

impl Channel {
    fn spawn(ssh: &Ssh, script: &str) -> anyhow::Result<Channel> {
        let hello_wait = hello_wait()?;
        let mut child = ssh
            .command(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Out of the terminal's process group: Ctrl-C is loadlens's to handle.
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start `{}`", ssh.argv[0]))?;
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("piped");
        let keep = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = err.read(&mut buf) {
                let mut s = keep.lock().unwrap_or_else(|e| e.into_inner());
                // The end of what ssh said is what explains a failure.
                if s.len() < 64 * 1024 {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        let out = child.stdout.take().expect("piped");
        let stdin = child.stdin.take();
        let child = Arc::new(Mutex::new(child));
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (tx, incoming) = mpsc::sync_channel(UNASKED);
        // Lines through a thread, so every wait for the server is bounded.
        let reader = Reader {
            tx,
            shared: shared.clone(),
            host: ssh.dest.host.clone(),
        };
        let ssh_child = child.clone();
        std::thread::spawn(move || {
            let broke = reader.read(out);
            let mut sh = lock(&reader.shared);
            sh.ended_unix_s = Some(unix_now());
            if let Some(why) = broke {
                sh.broke = Some(why);
                drop(sh);
                end_group(&ssh_child);
            }
        });
        Ok(Channel {
            dest: ssh.dest.clone(),
            stdin,
            child,
            incoming,
            shared,
            stderr,
            hello_wait,
        })
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    /// After a stop: the Evidence with the process's CPU (percent of a core, seconds);
    /// the samples sent before it are in `Shared`.
    fn evidence(&mut self) -> anyhow::Result<(Evidence, f64, f64)> {
        match self.reply(REPLY_WAIT)? {
            ToClient::Evidence {
                evidence,
                cpu_pct,
                cpu_s,
            } => Ok((*evidence, cpu_pct, cpu_s)),
            other => bail!("no evidence from {}: {}", self.dest.host, said(other)),
        }
    }

    fn send(&mut self, msg: &ToServer) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("the channel is closed")?;
        protocol::send(stdin, msg)
            .map(|_| ())
            .context("the channel to the remote watch closed")
    }

    /// The hello: `Ok(hostname)`, or `Err(arch)` when the build is missing there.
    fn hello(&mut self) -> anyhow::Result<Result<String, String>> {
        // A server that is not there yet (the build is missing) reads nothing: ignore.
        let _ = self.send(&ToServer::Hello {
            protocol: PROTOCOL,
            version: VERSION.into(),
        });
        let deadline = Instant::now() + self.hello_wait;
        let mut chatter = Vec::new();
        loop {
            let line = match self.next(deadline) {
                Ok(Incoming::Early(line)) => line,
                Ok(_) => bail!("a message before the hello"),
                Err(false) => return Err(self.died(&chatter)),
                Err(true) => {
                    end_group(&self.child);
                    let mut said = lock(&self.stderr).trim().to_string();
                    if said.is_empty() {
                        said = chatter.join("; ");
                    }
                    if said.is_empty() {
                        said = "nothing".into();
                    }
                    bail!(
                        "no hello from the remote watch on {} in {} s (ssh and the remote end said: {said:.200}): the session was ended — a slow host or link may need longer (LOADLENS_HELLO_WAIT=5m)",
                        self.dest.host,
                        self.hello_wait.as_secs_f64()
                    );
                }
            };
            if let Some(arch) = line.strip_prefix(MISSING) {
                return Ok(Err(arch.trim().to_string()));
            }
            if !protocol::is_message(&line) {
                // A login banner or a shell's rc file printing: not ours.
                if chatter.len() < 20 {
                    chatter.push(line);
                }
                continue;
            }
            return match serde_json::from_str::<ToClient>(&line) {
                Ok(ToClient::Hello {
                    protocol,
                    version,
                    hostname,
                    ..
                }) => match protocol::mismatch(protocol, &version, "server") {
                    Some(m) => bail!("refused: {m}"),
                    None => Ok(Ok(hostname)),
                },
                Ok(ToClient::Refused { reason }) => bail!("the remote watch refused: {reason}"),
                Ok(other) => bail!("unexpected first message: {}", said(other)),
                Err(e) => bail!("the remote watch sent an unreadable hello ({e}): {line:.120}"),
            };
        }
    }

    /// NTP-style exchanges; the one with the shortest round trip.
    fn clock(&mut self) -> anyhow::Result<ClockSample> {
        let mut samples = Vec::with_capacity(CLOCK_ROUNDS);
        for _ in 0..CLOCK_ROUNDS {
            let t0 = unix_now();
            self.send(&ToServer::Clock { t0 })?;
            match self.reply(REPLY_WAIT)? {
                // serde_json's float parsing may be one ULP off: the reply is ours if close.
                ToClient::Clock { t0: back, t1, t2 } if (back - t0).abs() < 1e-6 => {
                    samples.push(ClockSample {
                        t0,
                        t1,
                        t2,
                        t3: unix_now(),
                    })
                }
                other => bail!(
                    "clock exchange with {} failed: {}",
                    self.dest.host,
                    said(other)
                ),
            }
        }
        Ok(best(&samples).expect("at least one round"))
    }

    /// The next message, waiting at most `wait`.
    fn reply(&mut self, wait: Duration) -> anyhow::Result<ToClient> {
        let deadline = Instant::now() + wait;
        match self.next(deadline) {
            Ok(Incoming::Msg(m)) => Ok(m),
            Ok(Incoming::Unreadable(why)) => {
                bail!("unreadable message from {}: {why}", self.dest.host)
            }
            Ok(Incoming::Early(_)) => unreachable!("the hello came first"),
            Err(_) => {
                let why = self.died(&[]);
                Err(why.context(format!("the watch on {} stopped answering", self.dest.host)))
            }
        }
    }

    /// What came next; `Err(true)` when nothing came by `deadline`, `Err(false)` when
    /// the reader stopped (ssh's output ended, or a limit was passed).
    fn next(&mut self, deadline: Instant) -> Result<Incoming, bool> {
        self.incoming
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| e == RecvTimeoutError::Timeout)
    }

    /// Why the channel ended: ssh's exit and what it said.
    fn died(&mut self, chatter: &[String]) -> anyhow::Error {
        // The reader stopped at a limit and ended ssh: that is the reason.
        if let Some(why) = self.shared().broke.clone() {
            return anyhow::anyhow!("{why}");
        }
        let code = match wait_bounded(&self.child, Duration::from_secs(5)) {
            Some(status) => status.code(),
            None => {
                end_group(&self.child);
                None
            }
        };
        // The stderr thread has read everything once ssh exited; give it a moment.
        std::thread::sleep(Duration::from_millis(50));
        let mut said = self
            .stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if said.trim().is_empty() && !chatter.is_empty() {
            said = chatter.join("\n");
        }
        anyhow::anyhow!("{}", failure(&self.dest, code, &said))
    }

    /// Closes ssh's standard input (the remote watch exits on it) and waits for ssh,
    /// killing it if it lingers.
    fn close(&mut self) {
        drop(self.stdin.take());
        if wait_bounded(&self.child, Duration::from_secs(10)).is_none() {
            end_group(&self.child);
        }
    }
}

/// The wait for the hello: `LOADLENS_HELLO_WAIT` if set (a slow first connection, or a
/// test that wants it short), else [`HELLO_WAIT`].
fn hello_wait() -> anyhow::Result<Duration> {
    match std::env::var("LOADLENS_HELLO_WAIT") {
        Ok(v) => crate::units::parse_duration(&v).map_err(|e| {
            anyhow::anyhow!("LOADLENS_HELLO_WAIT=`{v}`: {e} — give a duration such as 30s or 5m")
        }),
        Err(_) => Ok(HELLO_WAIT),
    }
}

/// A reply that was not the one expected, in words.
fn said(msg: ToClient) -> String {
    match msg {
        ToClient::Error { message } => message,
        ToClient::Refused { reason } => reason,
        other => {
            let text = serde_json::to_string(&other).unwrap_or_default();
            format!("unexpected message {:.200}", text)
        }
    }
}
