//! Flags shared by every command that sends load (`run`, `sweep`): the request, its
//! timeout and TLS, the watch; and what they do before a load starts (read the body,
//! catch Ctrl-C).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::remote::Session;
use crate::spec::Spec;
use crate::units::parse_duration;
use crate::watch::discover::Hints;
use crate::watch::WatchSpec;

#[derive(Args, Debug, Clone)]
pub struct LoadFlags {
    /// Add a request header, e.g. -H 'Accept-Encoding: gzip' (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// HTTP method (`-X` as in curl).
    #[arg(short = 'm', long, visible_short_alias = 'X', default_value = "GET")]
    pub method: String,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the request body from a file.
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// Per-request timeout; a request unanswered after it counts as a timeout.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "2s")]
    pub timeout: Duration,
    /// Do not verify the server's TLS certificate.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Speak HTTP/2: with prior knowledge over cleartext http:// (h2c), by ALPN `h2`
    /// over https:// (which already prefers HTTP/2 when the server offers it).
    #[arg(long, conflicts_with = "h1")]
    pub h2: bool,
    /// Speak HTTP/1.1 only, also over https:// to a server that offers HTTP/2.
    #[arg(long)]
    pub h1: bool,
    /// Speak HTTP/3 over QUIC (UDP) to an https:// URL: many QUIC connections (-c),
    /// each with --max-concurrent-streams requests in flight.
    #[arg(long, conflicts_with_all = ["h1", "h2"])]
    pub h3: bool,
    /// HTTP/2 and HTTP/3: requests in flight on each connection (h2load's -m).
    #[arg(long, value_name = "N", default_value = "1")]
    pub max_concurrent_streams: u32,
    /// HTTP/3: resume each new QUIC connection's TLS session from a ticket an earlier
    /// one got (`tickets`, the default of the bare flag), and send its first requests in
    /// 0-RTT early data when the server accepts them (`0rtt`). Without it every
    /// handshake is a full one. With --connreqs N, a new connection every N requests.
    #[arg(long, value_name = "tickets|0rtt", num_args = 0..=1, default_missing_value = "tickets", value_parser = ["tickets", "0rtt"])]
    pub resume: Option<String>,
    /// Socket I/O of the workers: io_uring (one system call per loop for all
    /// connections; plain-text HTTP/1.1) or epoll. Default: io_uring where the kernel
    /// allows it, else epoll.
    #[arg(long, value_name = "uring|epoll", value_parser = ["auto", "uring", "epoll"], default_value = "auto")]
    pub io: String,
    /// Do not watch the machine (CPU, network, TCP counters, server processes).
    #[arg(long)]
    pub no_watch: bool,
    /// Watch the server on its own machine, over the system ssh (your config, agent
    /// and keys): loadlens copies itself there when that build is missing
    /// (~/.cache/loadlens/) and runs `loadlens watch --stdio`, e.g. ssh://root@10.0.0.2.
    #[arg(
        long = "watch",
        value_name = "ssh://[user@]host[:port]",
        conflicts_with = "no_watch"
    )]
    pub watch_ssh: Option<String>,
    /// The ssh program and its options for --watch ssh:// (like rsync's -e), e.g.
    /// 'ssh -i KEY -o ProxyJump=bastion'; BatchMode is added: no prompts.
    #[arg(long, value_name = "COMMAND", requires = "watch_ssh")]
    pub ssh_command: Option<String>,
    /// Sampling interval of the watch, e.g. 1s, 100ms.
    #[arg(long = "sample", value_parser = parse_duration, allow_hyphen_values = true, default_value = "1s")]
    pub sample: Duration,
    /// The server's process id (repeatable); its children are watched too. Needed when
    /// the server runs in another network namespace.
    #[arg(long = "server-pid")]
    pub server_pids: Vec<i32>,
    /// Watch the processes with this command name (repeatable), e.g. nginx, php-fpm8.2.
    #[arg(long = "server-name")]
    pub server_names: Vec<String>,
    /// Profile the server during the load: on-CPU call stacks of its processes (kernel
    /// perf events; needs root, CAP_PERFMON or kernel.perf_event_paranoid ≤ 1 for
    /// kernel frames), shown as "Where the server's CPU went" and kept in the Run.
    #[arg(long)]
    pub profile: bool,
    /// Samples per second per server thread for --profile.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10000), default_value = "99", value_name = "HZ")]
    pub profile_hz: u64,
    /// Do not watch where the server's threads slept ("Where the server's time went"):
    /// by default their states, calls and wait channels are sampled from /proc (held to
    /// at most 1% of a core); with --profile, every context switch with its stacks.
    #[arg(long)]
    pub no_offcpu: bool,
}

/// The shape of one load, as the command asked for it.
pub struct Shape {
    pub url: String,
    pub connections: u32,
    pub threads: u32,
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub connreqs: Option<u32>,
    pub rate: Option<f64>,
}

impl LoadFlags {
    /// The request body, read once.
    pub fn body(&self) -> anyhow::Result<Vec<u8>> {
        Ok(match (&self.body, &self.body_file) {
            (Some(b), _) => b.clone().into_bytes(),
            (None, Some(p)) => {
                let meta = std::fs::metadata(p)
                    .with_context(|| format!("cannot read the body file {}", p.display()))?;
                // A device or a FIFO may never end (/dev/zero): only files are read.
                if !meta.is_file() {
                    anyhow::bail!(
                        "--body-file {} is not a regular file (a device or pipe may never end): save the body to a file",
                        p.display()
                    );
                }
                if meta.len() > MAX_BODY_BYTES {
                    anyhow::bail!(
                        "--body-file {} is {} bytes: at most {} MiB is sent as a body",
                        p.display(),
                        meta.len(),
                        MAX_BODY_BYTES >> 20
                    );
                }
                let mut body = Vec::new();
                std::fs::File::open(p)
                    .and_then(|f| f.take(MAX_BODY_BYTES).read_to_end(&mut body))
                    .with_context(|| format!("cannot read the body file {}", p.display()))?;
                body
            }
            (None, None) => Vec::new(),
        })
    }

    /// The spec of a load of this shape with these flags, checked, and the open-files
    /// limit raised for its connections (or refused).
    pub fn spec(&self, shape: Shape, body_bytes: usize) -> anyhow::Result<Spec> {
        let spec = self.checked_spec(shape, body_bytes)?;
        ensure_fd_limit(spec.connections)?;
        Ok(spec)
    }

    /// The spec of a load of this shape with these flags, checked (no I/O).
    pub fn checked_spec(&self, shape: Shape, body_bytes: usize) -> anyhow::Result<Spec> {
        let (url, authorization) = crate::spec::split_credentials(&shape.url);
        let spec = Spec {
            url,
            authorization,
            connections: shape.connections,
            threads: shape.threads,
            duration_s: shape.duration.map(|d| d.as_secs_f64()),
            requests: shape.requests,
            connreqs: shape.connreqs,
            rate: shape.rate,
            method: self.method.to_ascii_uppercase(),
            headers: self.headers.clone(),
            body_bytes,
            timeout_s: self.timeout.as_secs_f64(),
            insecure: self.insecure,
            http: match (self.h1, self.h2, self.h3) {
                (true, _, _) => crate::spec::HttpVersion::H1,
                (_, true, _) => crate::spec::HttpVersion::H2,
                (_, _, true) => crate::spec::HttpVersion::H3,
                _ => crate::spec::HttpVersion::Auto,
            },
            max_concurrent_streams: self.max_concurrent_streams,
            resume: match self.resume.as_deref() {
                None => crate::spec::Resume::Off,
                Some("0rtt") => crate::spec::Resume::ZeroRtt,
                Some(_) => crate::spec::Resume::Tickets,
            },
            io: match self.io.as_str() {
                "uring" => crate::spec::IoBackend::Uring,
                "epoll" => crate::spec::IoBackend::Epoll,
                _ => crate::spec::IoBackend::Auto,
            },
            mix: None,
            stages: None,
            abort_if_behind_pct: None,
        };
        spec.check_flags()?;
        if self.sample < Duration::from_millis(100) {
            anyhow::bail!("--sample must be at least 100ms");
        }
        Ok(spec)
    }

    /// How to watch a server at `target`; `None` with `--no-watch`.
    pub fn watch(&self, target: std::net::SocketAddr) -> Option<WatchSpec> {
        (!self.no_watch).then(|| WatchSpec {
            interval: self.sample,
            target,
            hints: Hints {
                pids: self.server_pids.clone(),
                names: self.server_names.clone(),
            },
            profile_hz: self.profile.then_some(self.profile_hz),
            offcpu: self.profile && !self.no_offcpu,
            sampled: !self.no_offcpu,
        })
    }
}

impl LoadFlags {
    /// With `--watch ssh://…`, the channel to the server's watch, open and checked
    /// (before any load); the remote watch ends by itself after `guard` at the latest.
    pub fn remote(&self, guard: Duration, quiet: bool) -> anyhow::Result<Option<Session>> {
        let Some(dest) = &self.watch_ssh else {
            return Ok(None);
        };
        let session = Session::open(dest, self.ssh_command.as_deref(), guard)?;
        if let (Some(bytes), false) = (session.uploaded_bytes, quiet) {
            eprintln!(
                "note: copied this loadlens ({}) to {} (~/.cache/loadlens/, once per build)",
                crate::units::fmt_bytes(bytes as f64),
                session.hostname()
            );
        }
        Ok(Some(session))
    }
}

/// A flag raised by the first Ctrl-C or SIGTERM (the load ends early and still
/// reports); a second one kills.
pub fn stop_on_signals() -> anyhow::Result<Stop> {
    let flag = Arc::new(AtomicBool::new(false));
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, flag.clone())?;
        signal_hook::flag::register_usize(sig, signal.clone(), sig as usize)?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(Stop { flag, signal })
}

/// What stops a load early, and which signal did.
pub struct Stop {
    pub flag: Arc<AtomicBool>,
    signal: Arc<AtomicUsize>,
}

impl Stop {
    /// The signal that stopped the load, by name, if one did.
    pub fn signal(&self) -> Option<&'static str> {
        match self.signal.load(Ordering::Relaxed) as i32 {
            0 => None,
            signal_hook::consts::SIGTERM => Some("SIGTERM"),
            _ => Some("SIGINT"),
        }
    }

    /// The shell's exit status for a run ended by that signal (128 + its number), or
    /// success.
    pub fn exit_code(&self) -> ExitCode {
        match self.signal.load(Ordering::Relaxed) {
            0 => ExitCode::SUCCESS,
            s => ExitCode::from(128 + s as u8),
        }
    }
}

/// The body a file may hold: a larger one is refused before any load.
pub const MAX_BODY_BYTES: u64 = 64 << 20;

/// Raises the soft open-files limit to what `connections` need (one fd each, plus
/// slack for the threads' pollers, the watch and the profile) when the hard limit
/// allows; otherwise says so in one line, before any load.
pub fn ensure_fd_limit(connections: u32) -> anyhow::Result<()> {
    let need = connections as u64 + 256;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    if lim.rlim_cur >= need {
        return Ok(());
    }
    if lim.rlim_max >= need {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    anyhow::bail!(
        "-c {connections} needs about {need} open files but the limit is {} (hard limit {}): lower -c, or raise the limit (`ulimit -n {need}`, or LimitNOFILE= for a service)",
        lim.rlim_cur,
        lim.rlim_max
    )
}
