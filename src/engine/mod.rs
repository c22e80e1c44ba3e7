//! The load engine: N worker threads, each an event loop over its share of the
//! connections; per-thread counters merged after join; a per-second timeline assembled
//! from the workers' ticks. Measurement only: nothing here prints (progress goes through
//! the [`Progress`] callback the caller supplies).

mod arrival;
mod budget;
mod conn;
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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::run::{
    ClientCheck, ClientQuota, EndpointResult, ErrorCounts, LatencySummary, LoadResults, Phases,
    Second, Spread, ThreadCpu,
};
use crate::spec::{HttpVersion, IoBackend, Requests, Spec, Target};
use crate::sys::cgroup::{self, CpuStat, Proc};
use crate::sys::thread_cpu::ThreadCpuSample;
use h2::frame::H2Requests;
use stats::{ErrorKind, ThreadStats, Tick};
use timeline::TimelineBuilder;
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

/// Worker threads started, with what the engine reads from them while they run.
struct Gathered {
    handles: Vec<std::thread::JoinHandle<std::io::Result<ThreadEnd>>>,
    ticks: mpsc::Receiver<Tick>,
    spares: Vec<mpsc::Sender<hdrhistogram::Histogram<u64>>>,
    live: Vec<Arc<worker::LiveCount>>,
    start: Instant,
    deadline: Option<Instant>,
    timeout: Duration,
    endpoints: usize,
    /// The workers' stop flag, raised by `--abort-if-behind` (as on Ctrl-C).
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// The budget the workers claimed from, and when each request was due (a schedule
    /// by request): what was due and never claimed is counted at the end.
    budget: Arc<Budget>,
    due_us: Arc<Vec<u64>>,
}

impl Gathered {
    /// Gathers the workers' ticks into the timeline (reporting progress) until every
    /// worker has stopped, then merges their counts into the load's results; also
    /// returns each thread's CPU.
    fn finish(
        self,
        spec: &Spec,
        target: &Target,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<(LoadResults, Vec<ThreadCpu>)> {
        let Gathered {
            handles,
            ticks: rx,
            spares,
            live,
            start,
            deadline,
            timeout,
            endpoints,
            stop,
            budget,
            due_us,
        } = self;
        let threads = handles.len();
        let mut timeline = TimelineBuilder::new(timeout * 2 + Duration::from_secs(1), threads);
        let mut last_update = start;
        let mut behind = stages::Behind::new(spec);
        let mut aborted = None;
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(t) => {
                    let thread = t.thread;
                    let spare = timeline.add(t);
                    // A worker that has stopped no longer takes spares.
                    let _ = spares[thread].send(spare);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            let sum = |f: fn(&worker::LiveCount) -> u64| live.iter().map(|l| f(l)).sum::<u64>();
            if let (Some(b), None) = (behind.as_mut(), &aborted) {
                let done = sum(|l| l.responses.load(std::sync::atomic::Ordering::Relaxed))
                    + sum(|l| l.errors.load(std::sync::atomic::Ordering::Relaxed));
                aborted = b.check(now - start, done);
                if aborted.is_some() {
                    // The workers stop as they would on Ctrl-C; the load's results stand.
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            if now.duration_since(last_update) >= Duration::from_millis(500) {
                progress.update(
                    now - start,
                    sum(|l| l.responses.load(std::sync::atomic::Ordering::Relaxed)),
                    sum(|l| l.errors.load(std::sync::atomic::Ordering::Relaxed)),
                );
                last_update = now;
            }
        }

        let mut merged = ThreadStats::new(timeout * 2 + Duration::from_secs(1), endpoints);
        let mut cpus = Vec::with_capacity(threads);
        let mut end = start;
        for h in handles {
            let te = h
                .join()
                .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?
                .context("worker event loop failed")?;
            merged.merge(&te.stats);
            cpus.push(te.cpu);
            end = end.max(te.ended);
        }
        let elapsed = end.duration_since(start);
        // Rate stages end when the schedule's last request is answered, a moment before
        // the deadline: the window is still the whole schedule (unless the run was stopped).
        let scheduled_out =
            stages::rate_stages(spec).is_some() && !stop.load(std::sync::atomic::Ordering::Relaxed);
        let duration_s = match deadline {
            Some(d) if scheduled_out => d.duration_since(start).as_secs_f64(),
            // The window is the requested one: workers stop at the deadline, in-flight
            // requests are abandoned (as wrk does).
            Some(d) => d.duration_since(start).min(elapsed).as_secs_f64().max(1e-9),
            None => elapsed.as_secs_f64().max(1e-9),
        };
        if let Some(claims) = budget.claimed() {
            let end = start + Duration::from_secs_f64(duration_s);
            let rate = stages::rate_stages(spec);
            merged.due_unsent += pace::due_unclaimed(start, end, &due_us, rate, claims);
        }
        let (seconds, slices, per_thread_rates) = timeline.finish(duration_s);
        let iowait_cpus = merged.iowait_cpu_list();
        let mut results =
            results_from(spec, target, merged, duration_s, seconds, &per_thread_rates);
        if let Some(st) = &spec.stages {
            results.stages = stages::results(st, &slices, &results.timeline, duration_s);
        }
        results.aborted = aborted;
        results.slices = slices;
        results.iowait_cpus = iowait_cpus;
        Ok((results, cpus))
    }
}

fn results_from(
    spec: &Spec,
    target: &Target,
    s: ThreadStats,
    duration_s: f64,
    timeline: Vec<Second>,
    per_thread_rates: &[f64],
) -> LoadResults {
    let status_codes: BTreeMap<u16, u64> = s
        .status
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(code, &n)| (code as u16, n))
        .collect();
    let non_2xx_3xx = status_codes
        .iter()
        .filter(|(&code, _)| !(200..400).contains(&code))
        .map(|(_, &n)| n)
        .sum();
    let connect_errors = s
        .connect_errno
        .iter()
        .map(|&(errno, n)| (errno_name(errno), n))
        .collect();
    let e = |k: ErrorKind| s.errors[k as usize];
    let names = spec.mix.as_ref().map_or(&[][..], |m| &m.endpoints[..]);
    let endpoints = names
        .iter()
        .zip(&s.endpoints)
        .map(|(name, ep)| EndpointResult {
            name: name.clone(),
            requests: ep.responses + ep.errors,
            responses: ep.responses,
            errors: ep.errors,
            status_codes: ep
                .status
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(code, &n)| (code as u16, n))
                .collect(),
            latency: LatencySummary::from_histogram(&ep.latency, open_loop(spec)),
        })
        .collect();
    LoadResults {
        endpoints,
        duration_s,
        responses: s.responses,
        bytes_read: s.bytes_read,
        requests_per_s: s.responses as f64 / duration_s,
        bytes_per_s: s.bytes_read as f64 / duration_s,
        errors: ErrorCounts {
            connect: e(ErrorKind::Connect),
            read: e(ErrorKind::Read),
            write: e(ErrorKind::Write),
            timeout: e(ErrorKind::Timeout),
            parse: e(ErrorKind::Parse),
            reset: e(ErrorKind::Reset),
        },
        connect_errors,
        status_codes,
        non_2xx_3xx,
        connections_opened: s.connections,
        in_flight_at_end: s.in_flight,
        due_unsent_at_end: s.due_unsent,
        keepalive_closed: s.keepalive_closed,
        unsolicited: s.unsolicited,
        protocol: "http/1.1".into(),
        io: "epoll".into(),
        io_note: None,
        alt_svc_h3_port: s.alt_svc_h3,
        iowait_cpus: Vec::new(),
        streams_per_connection: 1,
        goaway_received: s.goaway,
        requests_per_connection: spec.connreqs,
        latency: LatencySummary::from_histogram(&s.latency, open_loop(spec)),
        connect_time: LatencySummary::from_histogram(&s.connect_time, false),
        phases: Some(Phases {
            dns_us: target.resolve_us,
            connect: LatencySummary::from_histogram(&s.phases.tcp_connect, false),
            tls_handshake: target
                .tls
                .then(|| LatencySummary::from_histogram(&s.phases.tls_handshake, false)),
            ttfb: LatencySummary::from_histogram(&s.phases.ttfb, false),
            body: LatencySummary::from_histogram(&s.phases.body, false),
            held: (!s.phases.held.is_empty())
                .then(|| LatencySummary::from_histogram(&s.phases.held, false)),
        }),
        thread_requests_per_s: Spread::of(per_thread_rates),
        timeline,
        slices: Vec::new(),
        stages: Vec::new(),
        aborted: None,
        quic: None,
    }
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
