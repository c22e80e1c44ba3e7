//! The load engine: N worker threads, each an event loop over its share of the
//! connections; per-thread counters merged after join; a per-second timeline assembled
//! from the workers' ticks. Measurement only: nothing here prints (progress goes through
//! the [`Progress`] callback the caller supplies).

pub mod http;
mod pace;
pub mod stats;
pub mod transport;
pub mod worker;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;

use crate::run::{
    ClientCheck, ErrorCounts, LatencySummary, LoadResults, Second, Spread, ThreadCpu,
};
use crate::spec::{RequestBytes, Spec, Target};
use crate::sys::thread_cpu::ThreadCpuSample;
use stats::{latency_histogram, ErrorKind, ThreadStats, Tick};
use transport::{Plain, Tls, TlsConfig, Transport};
use worker::{Budget, Worker};

/// Workers busy at least this share of the run mean the client set the pace.
pub const SATURATED_BUSY_PCT: f64 = 90.0;

/// Receives the engine's progress about once a second (for a live status line).
pub trait Progress {
    fn update(&mut self, elapsed: Duration, responses: u64, errors: u64);
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

/// Runs the load described by `spec` against `addr`.
pub fn run(
    spec: &Spec,
    target: &Target,
    addr: SocketAddr,
    body: &[u8],
    stop: Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> anyhow::Result<Outcome> {
    if target.tls {
        let cfg = TlsConfig::new(&target.host, spec.insecure)?;
        cfg.probe(addr, spec.timeout())?;
        run_with::<Tls>(spec, target, addr, body, cfg, stop, progress)
    } else {
        run_with::<Plain>(spec, target, addr, body, (), stop, progress)
    }
}

/// What each worker thread returns.
struct ThreadEnd {
    stats: ThreadStats,
    cpu: ThreadCpu,
    ended: Instant,
}

fn run_with<T: Transport + 'static>(
    spec: &Spec,
    target: &Target,
    addr: SocketAddr,
    body: &[u8],
    tconf: T::Config,
    stop: Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> anyhow::Result<Outcome> {
    let request = Arc::new(RequestBytes::build(spec, target, body));
    let budget = Arc::new(Budget::new(spec.requests));
    let threads = spec.threads as usize;
    let timeout = spec.timeout();
    let read_buffer = read_buffer_size(spec.connections);
    let (tx, rx) = mpsc::channel::<Tick>();
    let start = Instant::now();
    let deadline = spec.duration_s.map(|d| start + Duration::from_secs_f64(d));

    let mut handles = Vec::with_capacity(threads);
    let live: Vec<Arc<worker::LiveCount>> = (0..threads).map(|_| Arc::default()).collect();
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
            connreqs: spec.connreqs,
            // Each connection carries connections/rate of the schedule.
            pace: spec
                .rate
                .map(|r| Duration::from_secs_f64(spec.connections as f64 / r)),
            timeout,
            read_buffer,
            start,
            deadline,
            budget: budget.clone(),
            stop: stop.clone(),
            ticks: tx.clone(),
            live: live.clone(),
        };
        let h = std::thread::Builder::new()
            .name(format!("loadlens-w{id}"))
            .spawn(move || -> std::io::Result<ThreadEnd> {
                let before = ThreadCpuSample::now();
                let stats = w.run()?;
                let ended = Instant::now();
                let cpu = ThreadCpuSample::now().since(&before, ended - start);
                Ok(ThreadEnd { stats, cpu, ended })
            })
            .context("cannot start a worker thread")?;
        handles.push(h);
    }
    drop(tx);

    let mut timeline = TimelineBuilder::new(timeout * 2 + Duration::from_secs(1));
    let mut last_update = start;
    loop {
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(t) => timeline.add(t),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        if now.duration_since(last_update) >= Duration::from_millis(500) {
            let sum = |f: fn(&worker::LiveCount) -> u64| live.iter().map(|l| f(l)).sum::<u64>();
            progress.update(
                now - start,
                sum(|l| l.responses.load(std::sync::atomic::Ordering::Relaxed)),
                sum(|l| l.errors.load(std::sync::atomic::Ordering::Relaxed)),
            );
            last_update = now;
        }
    }

    let mut merged = ThreadStats::new(timeout * 2 + Duration::from_secs(1));
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
    let duration_s = match deadline {
        // The window is the requested one: workers stop at the deadline, in-flight
        // requests are abandoned (as wrk does).
        Some(d) => d.duration_since(start).min(elapsed).as_secs_f64().max(1e-9),
        None => elapsed.as_secs_f64().max(1e-9),
    };
    let (seconds, per_thread_rates) = timeline.finish(duration_s);
    let results = results_from(spec, merged, duration_s, seconds, &per_thread_rates);
    Ok(Outcome {
        results,
        client: client_check(cpus),
    })
}

fn results_from(
    spec: &Spec,
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
    LoadResults {
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
        },
        connect_errors,
        status_codes,
        non_2xx_3xx,
        connections_opened: s.connections,
        requests_per_connection: spec.connreqs,
        latency: LatencySummary::from_histogram(&s.latency, spec.rate.is_some()),
        connect_time: LatencySummary::from_histogram(&s.connect_time, false),
        thread_requests_per_s: Spread::of(per_thread_rates),
        timeline,
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
        0 => "other",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// Merges the workers' ticks into one entry per second.
struct TimelineBuilder {
    max: Duration,
    seconds: BTreeMap<u64, (Histogram<u64>, u64, u64, u64)>,
    /// Responses per second of each thread, for whole seconds only.
    per_thread: Vec<f64>,
}

impl TimelineBuilder {
    fn new(max: Duration) -> Self {
        TimelineBuilder {
            max,
            seconds: BTreeMap::new(),
            per_thread: Vec::new(),
        }
    }

    fn add(&mut self, t: Tick) {
        if !t.last {
            self.per_thread.push(t.responses as f64);
        }
        let max = self.max;
        let e = self
            .seconds
            .entry(t.second)
            .or_insert_with(|| (latency_histogram(max), 0, 0, 0));
        e.0.add(&t.latency).expect("histograms share bounds");
        e.1 += t.responses;
        e.2 += t.errors;
        e.3 += t.bytes_read;
    }

    fn finish(self, duration_s: f64) -> (Vec<Second>, Vec<f64>) {
        let seconds = self
            .seconds
            .into_iter()
            .map(|(t, (h, responses, errors, bytes_read))| Second {
                t_s: t,
                duration_s: (duration_s - t as f64).clamp(0.0, 1.0),
                responses,
                errors,
                bytes_read,
                p50_us: h.value_at_quantile(0.5),
                p99_us: h.value_at_quantile(0.99),
                max_us: h.max(),
            })
            .collect();
        (seconds, self.per_thread)
    }
}

fn client_check(threads: Vec<ThreadCpu>) -> ClientCheck {
    let busy_pct_mean = if threads.is_empty() {
        0.0
    } else {
        threads.iter().map(|t| t.busy_pct).sum::<f64>() / threads.len() as f64
    };
    ClientCheck {
        saturated: busy_pct_mean >= SATURATED_BUSY_PCT,
        busy_pct_mean,
        threads,
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
