//! Per-thread counters and histograms. Each worker owns one `ThreadStats`; they are
//! merged after the threads join, so recording a request touches no shared memory.

use std::time::Duration;

use hdrhistogram::Histogram;

/// The closed set of ways a request or connection can fail during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The TCP connect (or TLS handshake) failed or timed out.
    Connect = 0,
    /// Reading the response failed, or the server closed before a response began.
    Read = 1,
    /// Writing the request failed.
    Write = 2,
    /// No complete response within `--timeout`.
    Timeout = 3,
    /// The response was not valid HTTP/1.x or HTTP/2 (or was cut short).
    Parse = 4,
    /// HTTP/2: the server reset the request's stream (RST_STREAM); the connection goes on.
    Reset = 5,
}

pub const ERROR_KINDS: usize = 6;

/// Status codes are counted in a fixed array indexed by code: no map, no allocation.
pub const STATUS_SLOTS: usize = 1000;

/// Significant figures kept by every latency histogram.
pub const SIGFIG: u8 = 3;

/// A latency histogram in microseconds able to hold anything up to `max`.
pub fn latency_histogram(max: Duration) -> Histogram<u64> {
    let high = (max.as_micros() as u64).max(2);
    Histogram::new_with_bounds(1, high, SIGFIG).expect("valid histogram bounds")
}

/// Everything one worker thread counted.
#[derive(Debug, Clone)]
pub struct ThreadStats {
    pub responses: u64,
    pub bytes_read: u64,
    pub errors: [u64; ERROR_KINDS],
    /// Connect failures by errno (0 = timed out before the connect finished).
    pub connect_errno: Vec<(i32, u64)>,
    pub status: Box<[u64; STATUS_SLOTS]>,
    /// Connections established (TCP connect, plus TLS handshake for https).
    pub connections: u64,
    /// Requests begun but unanswered when the loop ended.
    pub in_flight: u64,
    /// Open loop: requests due before the end that were not sent (see `LoadResults`).
    pub due_unsent: u64,
    /// Reused connections the server closed before answering (retried on a new one).
    pub keepalive_closed: u64,
    /// Responses followed by bytes the server sent unasked (see `LoadResults`).
    pub unsolicited: u64,
    /// HTTP/2 GOAWAY frames received (the connection is replaced; not an error).
    pub goaway: u64,
    /// The UDP port of the HTTP/3 a response's `Alt-Svc` offered, if one did.
    pub alt_svc_h3: Option<u16>,
    /// Request latency, µs: from the first byte of the request written to the last byte
    /// of the response read.
    pub latency: Histogram<u64>,
    /// Connection set-up time, µs (including the TLS handshake).
    pub connect_time: Histogram<u64>,
    /// Time by phase, µs: where each request's and connection's time went.
    pub phases: PhaseHistograms,
    /// `--targets`: results per endpoint name (empty for a run of one request).
    pub endpoints: Vec<EndpointStats>,
    /// The CPUs on which this worker's io_uring waits were accounted as iowait (a
    /// kernel without `IORING_FEAT_NO_IOWAIT`), one bit per CPU.
    pub iowait_cpus: Vec<u64>,
}

/// One endpoint's counts in one worker thread: allocated before the run, merged after
/// join exactly like the totals.
#[derive(Debug, Clone)]
pub struct EndpointStats {
    pub responses: u64,
    /// Requests that failed (any error class).
    pub errors: u64,
    pub status: Box<[u64; STATUS_SLOTS]>,
    /// Latency, µs, as the run's (from the intended start).
    pub latency: Histogram<u64>,
}

/// One HdrHistogram per phase, recorded as the phase ends: fixed memory, no list of
/// samples, merged after join like the latency histogram.
#[derive(Debug, Clone)]
pub struct PhaseHistograms {
    /// TCP connect: `connect()` to the socket connected, per new connection.
    pub tcp_connect: Histogram<u64>,
    /// TLS handshake: TCP connected to handshake done, per new https connection.
    pub tls_handshake: Histogram<u64>,
    /// Time to first byte: the request's first byte written to the response's first
    /// byte read, per response.
    pub ttfb: Histogram<u64>,
    /// Body: the response's first byte read to its last, per response (0 when the
    /// whole response came in one read).
    pub body: Histogram<u64>,
    /// io_uring: the kernel's arrival time of a response's last bytes to the loop
    /// handling them, per response (completions are gathered into batches).
    pub held: Histogram<u64>,
}

impl PhaseHistograms {
    fn new(max: Duration) -> PhaseHistograms {
        PhaseHistograms {
            tcp_connect: latency_histogram(max),
            tls_handshake: latency_histogram(max),
            ttfb: latency_histogram(max),
            body: latency_histogram(max),
            held: latency_histogram(max),
        }
    }

    fn merge(&mut self, o: &PhaseHistograms) {
        for (a, b) in [
            (&mut self.tcp_connect, &o.tcp_connect),
            (&mut self.tls_handshake, &o.tls_handshake),
            (&mut self.ttfb, &o.ttfb),
            (&mut self.body, &o.body),
            (&mut self.held, &o.held),
        ] {
            a.add(b).expect("histograms share bounds");
        }
    }
}

/// µs between two instants, for a histogram (saturating: never negative).
#[inline]
pub fn us_between(from: std::time::Instant, to: std::time::Instant) -> u64 {
    to.saturating_duration_since(from).as_micros() as u64
}

impl ThreadStats {
    /// A worker's counts, with results kept for `endpoints` names.
    pub fn new(max_latency: Duration, endpoints: usize) -> ThreadStats {
        ThreadStats {
            responses: 0,
            bytes_read: 0,
            errors: [0; ERROR_KINDS],
            connect_errno: Vec::new(),
            status: Box::new([0; STATUS_SLOTS]),
            connections: 0,
            in_flight: 0,
            due_unsent: 0,
            keepalive_closed: 0,
            unsolicited: 0,
            goaway: 0,
            alt_svc_h3: None,
            latency: latency_histogram(max_latency),
            connect_time: latency_histogram(max_latency),
            phases: PhaseHistograms::new(max_latency),
            endpoints: (0..endpoints)
                .map(|_| EndpointStats {
                    responses: 0,
                    errors: 0,
                    status: Box::new([0; STATUS_SLOTS]),
                    latency: latency_histogram(max_latency),
                })
                .collect(),
            iowait_cpus: Vec::new(),
        }
    }

    /// This worker's wait for completions counted as iowait on `cpu`.
    pub fn mark_iowait_cpu(&mut self, cpu: u32) {
        let (word, bit) = ((cpu / 64) as usize, cpu % 64);
        if self.iowait_cpus.len() <= word {
            self.iowait_cpus.resize(word + 1, 0);
        }
        self.iowait_cpus[word] |= 1 << bit;
    }

    /// The CPUs marked by `mark_iowait_cpu`, in order.
    pub fn iowait_cpu_list(&self) -> Vec<u32> {
        let mut cpus = Vec::new();
        for (w, &bits) in self.iowait_cpus.iter().enumerate() {
            for b in 0..64 {
                if bits & (1 << b) != 0 {
                    cpus.push(w as u32 * 64 + b);
                }
            }
        }
        cpus
    }

    /// A response to a request of endpoint `e` (nothing without `--targets`).
    #[inline]
    pub fn endpoint_response(&mut self, e: u16, code: u16, latency_us: u64) {
        if let Some(s) = self.endpoints.get_mut(e as usize) {
            s.responses += 1;
            s.status[(code as usize).min(STATUS_SLOTS - 1)] += 1;
            s.latency.saturating_record(latency_us);
        }
    }

    /// A failed request of endpoint `e`.
    #[inline]
    pub fn endpoint_error(&mut self, e: u16) {
        if let Some(s) = self.endpoints.get_mut(e as usize) {
            s.errors += 1;
        }
    }

    #[inline]
    pub fn status(&mut self, code: u16) {
        let slot = (code as usize).min(STATUS_SLOTS - 1);
        self.status[slot] += 1;
    }

    pub fn connect_error(&mut self, errno: i32) {
        self.errors[ErrorKind::Connect as usize] += 1;
        match self.connect_errno.iter_mut().find(|(e, _)| *e == errno) {
            Some((_, n)) => *n += 1,
            None => self.connect_errno.push((errno, 1)),
        }
    }

    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Adds another thread's counts into this one.
    pub fn merge(&mut self, other: &ThreadStats) {
        self.responses += other.responses;
        self.in_flight += other.in_flight;
        self.due_unsent += other.due_unsent;
        self.keepalive_closed += other.keepalive_closed;
        self.unsolicited += other.unsolicited;
        self.goaway += other.goaway;
        self.alt_svc_h3 = self.alt_svc_h3.or(other.alt_svc_h3);
        self.bytes_read += other.bytes_read;
        for (a, b) in self.errors.iter_mut().zip(other.errors.iter()) {
            *a += b;
        }
        for &(errno, n) in &other.connect_errno {
            match self.connect_errno.iter_mut().find(|(e, _)| *e == errno) {
                Some((_, m)) => *m += n,
                None => self.connect_errno.push((errno, n)),
            }
        }
        for (a, b) in self.status.iter_mut().zip(other.status.iter()) {
            *a += b;
        }
        self.connections += other.connections;
        self.latency
            .add(&other.latency)
            .expect("histograms share bounds");
        self.connect_time
            .add(&other.connect_time)
            .expect("histograms share bounds");
        self.phases.merge(&other.phases);
        if self.iowait_cpus.len() < other.iowait_cpus.len() {
            self.iowait_cpus.resize(other.iowait_cpus.len(), 0);
        }
        for (a, b) in self.iowait_cpus.iter_mut().zip(&other.iowait_cpus) {
            *a |= b;
        }
        for (a, b) in self.endpoints.iter_mut().zip(&other.endpoints) {
            a.responses += b.responses;
            a.errors += b.errors;
            for (x, y) in a.status.iter_mut().zip(b.status.iter()) {
                *x += y;
            }
            a.latency.add(&b.latency).expect("histograms share bounds");
        }
    }
}

/// What a worker reports about one interval (a 100 ms slice, or more when its loop was
/// late) of its run; the engine merges these into the timeline.
#[derive(Debug)]
pub struct Tick {
    pub thread: usize,
    /// Index of the 100 ms slice (from the start of the load) the interval began in.
    pub slice: u64,
    pub responses: u64,
    pub errors: u64,
    pub bytes_read: u64,
    pub latency: Histogram<u64>,
    /// The worker's final tick: it has stopped.
    pub last: bool,
}

impl super::worker::LiveCount {
    /// A worker's responses and errors so far, for the progress line.
    pub(super) fn publish(&self, stats: &ThreadStats) {
        self.responses
            .store(stats.responses, std::sync::atomic::Ordering::Relaxed);
        self.errors
            .store(stats.error_total(), std::sync::atomic::Ordering::Relaxed);
    }
}
