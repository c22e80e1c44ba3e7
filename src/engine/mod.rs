//! The load engine: N worker threads, each an event loop over its share of the
//! connections; per-thread counters merged after join; a per-second timeline assembled
//! from the workers' ticks. Measurement only: nothing here prints (progress goes through
//! the [`Progress`] callback the caller supplies).

mod conn;
mod h1;
pub mod h2;
pub mod http;
mod pace;
pub mod stats;
pub mod transport;
mod uring;
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
    ClientCheck, ErrorCounts, LatencySummary, LoadResults, Phases, Second, Spread, ThreadCpu,
};
use crate::spec::{HttpVersion, IoBackend, RequestBytes, Spec, Target};
use crate::sys::thread_cpu::ThreadCpuSample;
use h2::frame::RequestFrames;
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
    const H2: &[u8] = b"h2";
    const H1: &[u8] = b"http/1.1";
    let mut h2 = spec.http == HttpVersion::H2;
    if target.tls {
        let offer: &[&[u8]] = match spec.http {
            HttpVersion::H2 => &[H2],
            HttpVersion::H1 => &[H1],
            // Open loop is HTTP/1.1 only for now.
            HttpVersion::Auto if spec.rate.is_some() => &[H1],
            HttpVersion::Auto => &[H2, H1],
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
    let request = Arc::new(RequestBytes::build(spec, target, body));
    let frames = match h2 {
        true => Some(Arc::new(
            RequestFrames::build(spec, target, body).map_err(|e| anyhow::anyhow!(e))?,
        )),
        false => None,
    };
    // An HTTP/2 frame (up to 16 KiB + its header) must fit a connection's buffer whole.
    let read_buffer = match h2 {
        true => read_buffer_size(spec.connections).max(32 * 1024),
        false => read_buffer_size(spec.connections),
    };
    let streams = if h2 { spec.max_concurrent_streams } else { 1 };
    let budget = Arc::new(Budget::new(spec.requests));
    let threads = spec.threads as usize;
    let timeout = spec.timeout();
    let (tx, rx) = mpsc::channel::<Tick>();
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
            spares: {
                let (give, take) = mpsc::channel();
                spares.push(give);
                take
            },
            live: live.clone(),
        };
        let h = std::thread::Builder::new()
            .name(format!("loadlens-w{id}"))
            .spawn(move || -> std::io::Result<ThreadEnd> {
                let before = ThreadCpuSample::now();
                let stats = runner(w)?;
                let ended = Instant::now();
                let cpu = ThreadCpuSample::now().since(&before, ended - start);
                Ok(ThreadEnd { stats, cpu, ended })
            })
            .context("cannot start a worker thread")?;
        handles.push(h);
    }
    drop(tx);

    let mut timeline = TimelineBuilder::new(timeout * 2 + Duration::from_secs(1), threads);
    let mut last_update = start;
    loop {
        match rx.recv_timeout(Duration::from_millis(250)) {
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
    let mut results = results_from(spec, target, merged, duration_s, seconds, &per_thread_rates);
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
        client: client_check(cpus),
    })
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
            reset: e(ErrorKind::Reset),
        },
        connect_errors,
        status_codes,
        non_2xx_3xx,
        connections_opened: s.connections,
        in_flight_at_end: s.in_flight,
        keepalive_closed: s.keepalive_closed,
        unsolicited: s.unsolicited,
        protocol: "http/1.1".into(),
        io: "epoll".into(),
        io_note: None,
        streams_per_connection: 1,
        goaway_received: s.goaway,
        requests_per_connection: spec.connreqs,
        latency: LatencySummary::from_histogram(&s.latency, spec.rate.is_some()),
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

/// Merges the workers' ticks into one entry per second, keeping memory flat however
/// long the run: a second stays open (with its merged histogram) only until every
/// worker has reported a later one, then it is reduced to its compact [`Second`] and
/// its histogram reused. Workers report seconds in increasing order, so a second no
/// worker can still report is final.
struct TimelineBuilder {
    max: Duration,
    /// Seconds some worker may still report: counts and the merged histogram.
    open: BTreeMap<u64, OpenSecond>,
    /// Per worker: the latest second it reported (`None` before its first tick,
    /// `u64::MAX` once it stopped).
    latest: Vec<Option<u64>>,
    done: Vec<Second>,
    /// Histograms of closed seconds, reset, for the next ones.
    free: Vec<Histogram<u64>>,
    /// Responses per second of each thread, for whole seconds only.
    per_thread: Vec<f64>,
    /// Each thread's last, partial second: (second, responses). Its rate stands in for
    /// the whole seconds when a run had none (under a second), so Req/Sec is not 0.
    partial: Vec<(u64, u64)>,
}

struct OpenSecond {
    latency: Histogram<u64>,
    responses: u64,
    errors: u64,
    bytes_read: u64,
}

impl TimelineBuilder {
    fn new(max: Duration, threads: usize) -> Self {
        TimelineBuilder {
            max,
            open: BTreeMap::new(),
            latest: vec![None; threads],
            done: Vec::new(),
            free: Vec::new(),
            per_thread: Vec::new(),
            partial: Vec::new(),
        }
    }

    /// Adds a worker's tick; returns the tick's histogram, emptied, for the worker to
    /// reuse.
    fn add(&mut self, mut t: Tick) -> Histogram<u64> {
        if t.last {
            self.partial.push((t.second, t.responses));
        } else {
            self.per_thread.push(t.responses as f64);
        }
        let max = self.max;
        let free = &mut self.free;
        let e = self.open.entry(t.second).or_insert_with(|| OpenSecond {
            latency: free.pop().unwrap_or_else(|| latency_histogram(max)),
            responses: 0,
            errors: 0,
            bytes_read: 0,
        });
        e.latency.add(&t.latency).expect("histograms share bounds");
        e.responses += t.responses;
        e.errors += t.errors;
        e.bytes_read += t.bytes_read;
        if let Some(l) = self.latest.get_mut(t.thread) {
            *l = Some(if t.last { u64::MAX } else { t.second });
        }
        self.close_final();
        t.latency.reset();
        t.latency
    }

    /// Closes every open second that no worker can report any more.
    fn close_final(&mut self) {
        let Some(horizon) = self.latest.iter().map(|l| l.unwrap_or(0)).min() else {
            return;
        };
        if self.latest.iter().any(Option::is_none) {
            return;
        }
        while let Some(entry) = self.open.first_entry() {
            if *entry.key() >= horizon {
                break;
            }
            let (t, s) = entry.remove_entry();
            self.close(t, s);
        }
    }

    fn close(&mut self, t: u64, mut s: OpenSecond) {
        let h = &s.latency;
        self.done.push(Second {
            t_s: t,
            duration_s: 1.0,
            responses: s.responses,
            errors: s.errors,
            bytes_read: s.bytes_read,
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        });
        s.latency.reset();
        self.free.push(s.latency);
    }

    fn finish(mut self, duration_s: f64) -> (Vec<Second>, Vec<f64>) {
        while let Some((t, s)) = self.open.pop_first() {
            self.close(t, s);
        }
        for s in self.done.iter_mut() {
            // The last one may be shorter than a second.
            s.duration_s = (duration_s - s.t_s as f64).clamp(0.0, 1.0);
        }
        if self.per_thread.is_empty() {
            self.per_thread = self
                .partial
                .iter()
                .map(|&(t, n)| n as f64 / (duration_s - t as f64).clamp(1e-3, 1.0))
                .collect();
        }
        (self.done, self.per_thread)
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

    fn tick(thread: usize, second: u64, us: u64, last: bool) -> Tick {
        let mut latency = latency_histogram(Duration::from_secs(5));
        latency.record(us).unwrap();
        Tick {
            thread,
            second,
            responses: 1,
            errors: 0,
            bytes_read: 100,
            latency,
            last,
        }
    }

    /// An hour of ticks from two workers, one a second behind the other: at most two
    /// seconds are ever open (each with a histogram), so the builder's memory does not
    /// grow with the run; a closed second costs only its compact record.
    #[test]
    fn timeline_memory_is_flat_over_an_hour() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        let mut most_open = 0;
        for s in 0..3600u64 {
            b.add(tick(0, s, 1000 + s, false));
            if s > 0 {
                b.add(tick(1, s - 1, 2000, false));
            }
            most_open = most_open.max(b.open.len());
            assert!(b.free.len() <= 2, "histograms are reused, not piled up");
        }
        b.add(tick(0, 3600, 7, true));
        b.add(tick(1, 3599, 7, true));
        assert!(most_open <= 2, "{most_open} seconds open at once");
        let (seconds, per_thread) = b.finish(3600.5);
        assert_eq!(seconds.len(), 3601);
        assert_eq!(per_thread.len(), 7199);
        // Bytes per second of timeline: the record alone.
        assert!(std::mem::size_of::<Second>() <= 64);
        // Seconds are exact: both workers' responses, the slower one's latency on top.
        assert_eq!(seconds[10].responses, 2);
        assert_eq!(seconds[10].p50_us, 1010);
        assert_eq!(seconds[10].max_us, 2000);
        assert_eq!(seconds[3600].duration_s, 0.5);
        assert_eq!(seconds[3599].responses, 2);
    }

    #[test]
    fn a_second_stays_open_until_every_worker_has_moved_past_it() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        b.add(tick(0, 0, 10, false));
        b.add(tick(0, 1, 10, false));
        assert_eq!(b.open.len(), 2, "worker 1 has not reported yet");
        b.add(tick(1, 0, 30, false));
        assert_eq!(
            b.open.len(),
            2,
            "worker 1 may still report more of second 0"
        );
        b.add(tick(1, 1, 30, false));
        assert_eq!(b.open.len(), 1);
        assert_eq!(b.done[0].max_us, 30);
    }

    /// Under a second no worker reports a whole second: Req/Sec comes from the partial
    /// one (it showed 0.00 before).
    #[test]
    fn a_run_under_a_second_has_a_thread_rate() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        b.add(tick(0, 0, 10, true));
        b.add(tick(1, 0, 10, true));
        let (seconds, per_thread) = b.finish(0.25);
        assert_eq!(seconds[0].duration_s, 0.25);
        assert_eq!(per_thread, vec![4.0, 4.0]);
        // With whole seconds, the partial one is left out as before.
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 1);
        b.add(tick(0, 0, 10, false));
        b.add(tick(0, 1, 10, true));
        assert_eq!(b.finish(1.5).1, vec![1.0]);
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::EADDRNOTAVAIL), "EADDRNOTAVAIL");
        assert_eq!(errno_name(9999), "errno 9999");
    }
}
