//! The load engine: N worker threads, each an event loop over its share of the
//! connections; per-thread counters merged after join; a per-second timeline assembled
//! from the workers' ticks. Measurement only: nothing here prints (progress goes through
//! the [`Progress`] callback the caller supplies).

mod arrival;
mod budget;
mod collect;
mod conn;
use collect::Gathered;
mod gather;
mod h1;
pub mod h2;
mod h3;
pub mod http;
mod pace;
mod stages;
pub mod stats;
mod timeline;
pub mod transport;
mod uring;

/// Whether io_uring can drive a load here: Err, why not (`loadlens doctor`).
pub fn uring_probe() -> Result<(), String> {
    uring::probe()
}
pub mod worker;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::run::{ClientCheck, ClientQuota, LoadResults, ThreadCpu};
use crate::spec::{HttpVersion, IoBackend, Requests, Spec, Target};
use crate::sys::cgroup::{self, CpuStat, Proc};
use crate::sys::thread_cpu::ThreadCpuSample;
use h2::frame::H2Requests;
use stats::{ThreadStats, Tick};
use transport::{Plain, Tls, TlsConfig, Transport};
use worker::{Budget, Worker};

/// Workers busy at least this share of the run mean the client set the pace.
pub const SATURATED_BUSY_PCT: f64 = 90.0;

/// Receives the engine's progress about once a second (for a live status line).
pub trait Progress {
    fn update(&mut self, elapsed: Duration, responses: u64, errors: u64);
    /// What is running now when it is not the load itself (a probe), for the line's
    /// prefix; empty for the load.
    fn phase(&mut self, _what: &str) {}
}

/// No progress reporting.
pub struct Silent;
impl Progress for Silent {
    fn update(&mut self, _: Duration, _: u64, _: u64) {}
}

/// What the engine hands back: the load results and its own CPU self-check.
pub struct Outcome {
    pub results: LoadResults,
    pub client: ClientCheck,
}

/// Read buffer per connection: large enough that a 91 KiB response costs a couple of
/// reads (the socket, not the buffer, sets the pace), shrunk for very many connections
/// so memory stays bounded (256 MiB over all connections).
fn read_buffer_size(connections: u32) -> usize {
    const MAX: usize = 128 * 1024;
    const MIN: usize = 16 * 1024;
    (256 * 1024 * 1024 / connections.max(1) as usize).clamp(MIN, MAX)
}

/// Whether requests are sent on a schedule (`-R`, or `--replay` at a speed): latency is
/// then measured from each request's due time.
fn open_loop(spec: &Spec) -> bool {
    spec.rate.is_some()
        || stages::rate_stages(spec).is_some()
        || spec
            .mix
            .as_ref()
            .and_then(|m| m.replay.as_ref())
            .is_some_and(|r| r.speed.is_some())
}

/// Runs the load described by `spec` against `addr`.
pub fn run(
    spec: &Spec,
    target: &Target,
    addr: SocketAddr,
    body: &[u8],
    stop: Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> anyhow::Result<Outcome> {
    const H2: &[u8] = b"h2";
    const H1: &[u8] = b"http/1.1";
    if spec.http == HttpVersion::H3 {
        return h3::run(spec, target, addr, body, stop, progress);
    }
    let mut h2 = spec.http == HttpVersion::H2;
    if target.tls {
        let offer: &[&[u8]] = match spec.http {
            HttpVersion::H2 => &[H2],
            HttpVersion::H1 => &[H1],
            HttpVersion::Auto => &[H2, H1],
            HttpVersion::H3 => unreachable!("HTTP/3 runs in h3.rs"),
        };
        let cfg = TlsConfig::new(&target.host, spec.insecure, offer)?;
        let chosen = cfg.probe(addr, spec.timeout())?;
        h2 = chosen.as_deref() == Some(H2);
        if spec.http == HttpVersion::H2 && !h2 {
            anyhow::bail!("{addr} did not choose HTTP/2 by ALPN (h2) — drop --h2 to use HTTP/1.1");
        }
        // Every connection offers only what the probe saw chosen: one protocol per run.
        let cfg = cfg.only(if h2 { H2 } else { H1 });
        let io = Io::epoll_for(spec, "TLS");
        let runner: Runner<Tls> = Worker::run;
        run_with(
            spec,
            target,
            addr,
            body,
            h2,
            cfg,
            (io, runner),
            stop,
            progress,
        )
    } else {
        let io = match (h2, spec.io) {
            (true, _) => Io::epoll_for(spec, "HTTP/2"),
            (false, IoBackend::Epoll) => Io {
                uring: false,
                note: None,
            },
            (false, _) => match uring::probe() {
                Ok(()) => Io {
                    uring: true,
                    note: None,
                },
                Err(why) => Io {
                    uring: false,
                    note: Some(format!("io_uring unavailable ({why}): epoll used")),
                },
            },
        };
        let runner: Runner<Plain> = match io.uring {
            true => |w| uring::run(&w),
            false => Worker::run,
        };
        run_with(
            spec,
            target,
            addr,
            body,
            h2,
            (),
            (io, runner),
            stop,
            progress,
        )
    }
}

/// The workers' socket I/O for a run, and why epoll when io_uring was not used.
struct Io {
    uring: bool,
    note: Option<String>,
}

/// A worker thread's loop.
type Runner<T> = fn(Worker<T>) -> std::io::Result<ThreadStats>;

impl Io {
    /// epoll because the run speaks `what`, which the io_uring loop does not drive;
    /// worth a note only when io_uring was asked for by name.
    fn epoll_for(spec: &Spec, what: &str) -> Io {
        Io {
            uring: false,
            note: (spec.io == IoBackend::Uring)
                .then(|| format!("io_uring drives plain-text HTTP/1.1 only: {what} runs on epoll")),
        }
    }
}

/// What each worker thread returns.
struct ThreadEnd {
    stats: ThreadStats,
    cpu: ThreadCpu,
    ended: Instant,
}

/// Starts worker thread `id` running `work`, timing its CPU from `start` to its end.
fn spawn_worker(
    id: usize,
    start: Instant,
    work: impl FnOnce() -> std::io::Result<ThreadStats> + Send + 'static,
) -> anyhow::Result<std::thread::JoinHandle<std::io::Result<ThreadEnd>>> {
    std::thread::Builder::new()
        .name(format!("loadlens-w{id}"))
        .spawn(move || -> std::io::Result<ThreadEnd> {
            let before = ThreadCpuSample::now();
            let stats = work()?;
            let ended = Instant::now();
            let cpu = ThreadCpuSample::now().since(&before, ended - start);
            Ok(ThreadEnd { stats, cpu, ended })
        })
        .context("cannot start a worker thread")
}

#[allow(clippy::too_many_arguments)]
fn run_with<T: Transport + 'static>(
    spec: &Spec,
    target: &Target,
    addr: SocketAddr,
    body: &[u8],
    h2: bool,
    tconf: T::Config,
    (io, runner): (Io, Runner<T>),
    stop: Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> anyhow::Result<Outcome> {
    // HTTP/2 sends the body from its frames; the HTTP/1.1 bytes then keep only the head
    // (whether responses have bodies), not two more copies of a body of up to 64 MiB.
    let h1_body = if h2 { &[][..] } else { body };
    let request = Arc::new(Requests::build(spec, target, h1_body));
    let frames = match h2 {
        true => Some(Arc::new(
            H2Requests::build(spec, target, body).map_err(|e| anyhow::anyhow!(e))?,
        )),
        false => None,
    };
    // An HTTP/2 frame (up to 16 KiB + its header) must fit a connection's buffer whole.
    let read_buffer = match h2 {
        true => read_buffer_size(spec.connections).max(32 * 1024),
        false => read_buffer_size(spec.connections),
    };
    let streams = if h2 { spec.max_concurrent_streams } else { 1 };
    let budget = Arc::new(Budget::new(spec.requests.or(stages::budget(spec))));
    let stage_plan = spec.stages.clone().map(Arc::new);
    let threads = spec.threads as usize;
    let timeout = spec.timeout();
    let (tx, rx) = mpsc::channel::<Tick>();
    let quota = quota_before();
    let start = Instant::now();
    let deadline = spec.duration_s.map(|d| start + Duration::from_secs_f64(d));

    let mut handles = Vec::with_capacity(threads);
    let live: Vec<Arc<worker::LiveCount>> = (0..threads).map(|_| Arc::default()).collect();
    let mut spares = Vec::with_capacity(threads);
    for (id, live) in live.iter().enumerate() {
        // Connections split as evenly as possible; the first threads take the remainder.
        let share = spec.connections as usize / threads
            + usize::from(id < spec.connections as usize % threads);
        let w = Worker::<T> {
            id,
            connections: share,
            addr,
            transport: tconf.clone(),
            request: request.clone(),
            h2: frames.clone(),
            streams,
            connreqs: spec.connreqs,
            // Each connection carries connections/rate of the schedule.
            // --replay at a speed: paced by each request's due time (`start_request`).
            pace: pace::connection_pace(spec, &request.due_us),
            stages: stage_plan.clone(),
            threads,
            timeout,
            read_buffer,
            start,
            deadline,
            budget: budget.clone(),
            stop: stop.clone(),
            ticks: tx.clone(),
            spares: {
                let (give, take) = mpsc::channel();
                spares.push(give);
                take
            },
            live: live.clone(),
        };
        handles.push(spawn_worker(id, start, move || runner(w))?);
    }
    drop(tx);
    let gathered = Gathered {
        handles,
        ticks: rx,
        spares,
        live,
        start,
        deadline,
        timeout,
        endpoints: request.endpoints,
        stop: stop.clone(),
        budget,
        due_us: request.due_us.clone(),
    };
    let (mut results, cpus) = gathered.finish(spec, target, progress)?;
    if io.uring {
        results.io = "io_uring".into();
    }
    results.io_note = io.note;
    if h2 {
        results.protocol = "h2".into();
        results.streams_per_connection = streams;
    }
    Ok(Outcome {
        results,
        client: client_check(cpus, quota_over(quota)),
    })
}

/// The symbolic name of an errno, for the connect-error breakdown.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNRESET => "ECONNRESET",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::EAGAIN => "EAGAIN",
        libc::ENOBUFS => "ENOBUFS",
        libc::EPIPE => "EPIPE",
        libc::EPROTO => "EPROTO",
        0 => "other",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// loadlens's cgroup quota (in cores) and its `cpu.stat` before the load.
fn quota_before() -> Option<(f64, CpuStat)> {
    let cores = cgroup::quota_cores(&cgroup::cpu_max(Proc::Me)?)?;
    Some((cores, cgroup::cpu_stat(Proc::Me)?))
}

/// What loadlens's cgroup quota did over the load.
fn quota_over(before: Option<(f64, CpuStat)>) -> Option<ClientQuota> {
    let (cores, a) = before?;
    let d = cgroup::cpu_stat(Proc::Me)?.delta(&a);
    Some(ClientQuota {
        cores,
        periods: d.periods,
        throttled_periods: d.throttled_periods,
        throttled_ms: d.throttled_ns as f64 / 1e6,
    })
}

fn client_check(threads: Vec<ThreadCpu>, quota: Option<ClientQuota>) -> ClientCheck {
    let busy_pct_mean = if threads.is_empty() {
        0.0
    } else {
        threads.iter().map(|t| t.busy_pct).sum::<f64>() / threads.len() as f64
    };
    ClientCheck {
        saturated: busy_pct_mean >= SATURATED_BUSY_PCT,
        busy_pct_mean,
        threads,
        quota,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_buffer_is_bounded() {
        assert_eq!(read_buffer_size(50), 128 * 1024);
        assert_eq!(read_buffer_size(100_000), 16 * 1024);
        assert!(read_buffer_size(4000) * 4000 <= 256 * 1024 * 1024);
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::EADDRNOTAVAIL), "EADDRNOTAVAIL");
        assert_eq!(errno_name(9999), "errno 9999");
    }
}
