//! One worker thread: an event loop (mio/epoll, edge-triggered) over its share of the
//! connections, each with one request in flight (closed loop) over HTTP/1.1 (`h1.rs`),
//! or up to `--max-concurrent-streams` over HTTP/2 (`h2/`).
//!
//! Per request the loop does only the socket I/O, two clock reads and three histogram
//! records (latency, time to first byte, body): the request bytes were built before the run, each connection owns its read
//! buffer, and counters live in this thread until it ends. Time-based work (timeouts,
//! retries, the per-second tick) runs from the loop, not per request. A `--targets` mix
//! or `--replay` adds an index per request: the target is read from the order table
//! built before the run (`spec::Requests`), by the ordinal the request's budget claim
//! returned (`Budget::claim`), and its endpoint's counters are slots allocated before
//! the run.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::{Events, Interest, Poll, Token};

pub(super) use super::budget::{Budget, RESEND, UNCOUNTED};
use super::conn::{Conn, Next, Phase};
use super::gather::Gather;
use super::h2::frame::H2Requests;
use super::http::ResponseParser;
use super::pace::PaceTimer;
use super::stats::{latency_histogram, us_between, ErrorKind, ThreadStats, Tick};
use super::transport::Transport;
use crate::spec::{Requests, StageKind, Stages};

/// How often connections are checked for timeouts and failed connects retried.
pub(super) const SWEEP: Duration = Duration::from_millis(20);
/// The interval of the timeline: its finest slice (100 ms, so a stall of a few hundred
/// milliseconds shows as the slices it emptied), ten of which make a second.
pub(super) const TICK: Duration = Duration::from_millis(100);
/// A connection whose connect failed waits this long before trying again, so a refused
/// port costs a few syscalls per second rather than a spinning core.
const RETRY_AFTER: Duration = Duration::from_millis(20);

/// Everything a worker needs, moved into its thread.
pub struct Worker<T: Transport> {
    pub id: usize,
    pub connections: usize,
    pub addr: SocketAddr,
    pub transport: T::Config,
    /// The requests, built once, and the order they are sent in.
    pub request: Arc<Requests>,
    /// The requests as HTTP/2 frames (one per target, like `request`) when the run
    /// speaks HTTP/2 (h2c with prior knowledge, or TLS where ALPN chose `h2`); `None` =
    /// HTTP/1.1.
    pub h2: Option<Arc<H2Requests>>,
    /// HTTP/2: requests in flight per connection.
    pub streams: u32,
    pub connreqs: Option<u32>,
    /// Open loop: each connection sends a request every `pace` (connections ÷ rate),
    /// on schedule whatever the responses do; latency is measured from the scheduled
    /// time (wrk2's correction for coordinated omission). `None` = closed loop.
    pub pace: Option<Duration>,
    /// `--stages` (`stages.rs`), and the load's threads (a connection's place in it).
    pub stages: Option<Arc<Stages>>,
    pub threads: usize,
    pub timeout: Duration,
    pub read_buffer: usize,
    pub start: Instant,
    pub deadline: Option<Instant>,
    pub budget: Arc<Budget>,
    pub stop: Arc<AtomicBool>,
    pub ticks: Sender<Tick>,
    /// Histograms the engine has merged and hands back for the next tick, so a tick
    /// moves its histogram out instead of cloning it (no allocation per second once
    /// the pool is warm).
    pub spares: Receiver<Histogram<u64>>,
    /// Responses and errors so far, published once per event batch for the live
    /// progress line (a relaxed store, not a per-request write).
    pub live: Arc<LiveCount>,
}

/// A worker's running totals for the progress line, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct LiveCount {
    pub responses: std::sync::atomic::AtomicU64,
    pub errors: std::sync::atomic::AtomicU64,
}

pub(super) struct Loop<'a, T: Transport> {
    pub(super) w: &'a Worker<T>,
    /// The epoll poller; `None` in the io_uring loop (`uring/`), which shares the rest.
    pub(super) poll: Option<Poll>,
    pub(super) stats: ThreadStats,
    pub(super) interval: Histogram<u64>,
    pub(super) interval_responses: u64,
    pub(super) interval_errors: u64,
    pub(super) interval_bytes: u64,
    /// Connections not yet `Done`.
    pub(super) live: usize,
    /// Open loop: (due time, slot) of connections waiting in `Paced`, earliest first.
    pub(super) paced: BinaryHeap<Reverse<(Instant, usize)>>,
}

impl<T: Transport> Worker<T> {
    /// Slot `i`'s connection state, before its first connect, with a read buffer of
    /// `buf` bytes (none in the io_uring loop, whose buffers are the kernel's pick).
    pub(super) fn new_conn<S>(&self, i: usize, buf: usize) -> Conn<S> {
        let n = self.connections;
        Conn {
            transport: None,
            phase: Phase::Retry,
            parser: ResponseParser::new(self.request.head(0)),
            buf: vec![0u8; buf].into_boxed_slice(),
            pending: 0,
            written: 0,
            last: false,
            sent: 0,
            permit: false,
            drained: true,
            hup: false,
            since: self.start,
            intended: self.start,
            h2: None,
            tcp_up: false,
            tcp_at: self.start,
            got_first: false,
            first_at: self.start,
            // Staggered so the connections' requests interleave evenly.
            due: super::pace::first_due(self.start, self.pace, i, n),
            idx: i,
            target: 0,
            ordinal: UNCOUNTED,
            // Without -n each connection walks the order from its own place in it.
            seq: (self.id as u64) << 32 | (i as u64 * 7919),
        }
    }

    /// Runs the load until the deadline, the budget or the stop flag ends it.
    pub fn run(self) -> io::Result<ThreadStats> {
        let mut lp = Loop::new(&self, Some(Poll::new()?));
        let mut conns: Vec<Conn<T>> = (0..self.connections)
            .map(|i| self.new_conn(i, self.read_buffer))
            .collect();
        let now = Instant::now();
        for (i, c) in conns.iter_mut().enumerate() {
            lp.open(c, i, now);
        }
        let mut events = Events::with_capacity(1024);
        // epoll_wait's timeout has millisecond resolution: a paced request would leave up
        // to 1 ms late and that lateness would count as latency. A timerfd wakes the
        // loop at the due time to the microsecond.
        let timer = match self.pace {
            Some(_) => Some(PaceTimer::new(lp.epoll(), Token(TIMER))?),
            None => None,
        };
        let mut armed: Option<Instant> = None;
        // HTTP/2, and HTTP/1.1 over TLS with keep-alive, let responses gather in closed
        // loop (`gather.rs`); their times are the kernel's arrival times, so what the hold
        // adds shows only as `held`.
        let keep_alive_tls = T::TLS && self.connreqs.is_none();
        let mut gather = ((self.h2.is_some() || keep_alive_tls) && self.pace.is_none())
            .then(|| Gather::new(now, self.connections * self.streams as usize));
        let mut next_sweep = now + SWEEP;
        let mut next_tick = self.start + TICK;
        loop {
            let now = Instant::now();
            if lp.live == 0 || self.stop.load(Ordering::Relaxed) {
                break;
            }
            if self.deadline.is_some_and(|d| now >= d) {
                break;
            }
            let mut wake = next_sweep.min(next_tick);
            if let (Some(t), Some(Reverse((due, _)))) = (&timer, lp.paced.peek()) {
                if armed != Some(*due) {
                    t.arm(due.saturating_duration_since(now))?;
                    armed = Some(*due);
                }
            }
            if let Some(d) = self.deadline {
                wake = wake.min(d);
            }
            match lp
                .poll
                .as_mut()
                .expect("the epoll loop has a poller")
                .poll(&mut events, Some(wake.saturating_duration_since(now)))
            {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let batch_from = lp.stats.responses;
            for ev in events.iter() {
                let i = ev.token().0;
                if i == TIMER {
                    if let Some(t) = &timer {
                        t.clear();
                    }
                    armed = None;
                    continue;
                }
                let c = &mut conns[i];
                // A FIN or error already reported with this event will not be reported
                // again: read until the socket says so.
                if ev.is_read_closed() || ev.is_error() {
                    c.hup = true;
                    c.drained = false;
                }
                lp.drive(c, i, Instant::now());
            }
            if let Some(hold) = gather
                .as_ref()
                .and_then(|g| g.hold(lp.stats.responses - batch_from))
            {
                std::thread::sleep(hold);
            }
            self.live.publish(&lp.stats);
            let now = Instant::now();
            while let Some(&Reverse((due, i))) = lp.paced.peek() {
                if due > now {
                    break;
                }
                lp.paced.pop();
                let c = &mut conns[i];
                if c.phase == Phase::Paced && c.due == due {
                    lp.resume(c, i, now);
                } else if c.phase == Phase::H2 && c.due == due {
                    let next = lp.h2_due(c, now);
                    lp.after(c, i, next, now);
                }
            }
            if now >= next_sweep {
                if let Some(g) = gather.as_mut() {
                    g.measure(now, lp.stats.responses);
                }
                for (i, c) in conns.iter_mut().enumerate() {
                    lp.sweep(c, i, now);
                }
                next_sweep = now + SWEEP;
            }
            if now >= next_tick {
                lp.tick(slice_of(self.start, next_tick), false);
                while next_tick <= now {
                    next_tick += TICK;
                }
            }
        }
        // Requests on the wire when time ran out: accounted, neither response nor error.
        let stats = lp.end(&conns, next_tick);
        for c in conns.iter_mut().filter(|c| c.phase == Phase::H2) {
            Loop::h2_drain(c);
        }
        Ok(stats)
    }
}

/// The pacing timer's token (connections use their slot index).
const TIMER: usize = usize::MAX;

/// The slice (of [`TICK`]) in which the interval ending at `tick_end` began.
pub(super) fn slice_of(start: Instant, tick_end: Instant) -> u64 {
    let ticks = tick_end.saturating_duration_since(start).as_nanos() / TICK.as_nanos();
    (ticks as u64).saturating_sub(1)
}

impl<T: Transport> Loop<'_, T> {
    fn epoll(&self) -> &Poll {
        self.poll.as_ref().expect("the epoll loop has a poller")
    }

    /// Opens a new connection on slot `i`, claiming a budget unit first so no connection
    /// is opened that could never send a request.
    fn open(&mut self, c: &mut Conn<T>, i: usize, now: Instant) {
        if !self.begin_open(c, now) {
            return;
        }
        match T::connect(self.w.addr, &self.w.transport) {
            Ok(mut t) => {
                if let Err(e) = self.epoll().registry().register(
                    t.socket(),
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    self.connect_failed(c, &e, now);
                    return;
                }
                c.transport = Some(t);
                c.phase = Phase::Connecting;
            }
            Err(e) => self.connect_failed(c, &e, now),
        }
    }

    /// A paced connection's request is due: send it.
    fn resume(&mut self, c: &mut Conn<T>, i: usize, now: Instant) {
        if self.start_request(c, now) {
            self.drive(c, i, now);
        } else {
            self.finish(c);
        }
    }

    fn drive(&mut self, c: &mut Conn<T>, i: usize, now: Instant) {
        let next = self.step(c, now);
        self.after(c, i, next, now);
    }

    /// What the connection asked for after an event.
    fn after(&mut self, c: &mut Conn<T>, i: usize, next: Next, now: Instant) {
        match next {
            Next::Wait => {}
            Next::Reopen => self.open(c, i, now),
            Next::Retry => {
                c.transport = None;
                c.phase = Phase::Retry;
                c.since = now;
            }
        }
    }

    /// Time-based checks for one connection: request/connect timeouts and retries.
    fn sweep(&mut self, c: &mut Conn<T>, i: usize, now: Instant) {
        match self.overdue(c, now) {
            Overdue::No => {}
            Overdue::Retry | Overdue::Drain => self.open(c, i, now),
            Overdue::Connect => {
                let e = io::Error::from_raw_os_error(libc::ETIMEDOUT);
                self.connect_failed(c, &e, now);
                self.open(c, i, now);
            }
            Overdue::Request => {
                self.request_failed(c.target, ErrorKind::Timeout);
                self.open(c, i, now);
            }
            Overdue::H2 => {
                self.h2_fail(c, ErrorKind::Timeout);
                self.open(c, i, now);
            }
        }
    }
}

/// What time asks of a connection (`Loop::overdue`).
pub(super) enum Overdue {
    No,
    /// A failed connect has waited long enough: open again.
    Retry,
    /// The connect (or TLS handshake) timed out.
    Connect,
    /// The request in flight timed out.
    Request,
    /// The server did not close after the last response in time: open anyway.
    Drain,
    /// An HTTP/2 connection's oldest stream (or its set-up) timed out.
    H2,
}

/// The bookkeeping both loops share (epoll here, io_uring in `uring/`): the budget,
/// requests begun and recorded, failures counted, the timeline's ticks. Generic over the
/// connection's socket type `S`, which none of it touches.
impl<'a, T: Transport> Loop<'a, T> {
    /// A loop's bookkeeping for worker `w`, before any connection; `poll` is the epoll
    /// poller (`None` for io_uring).
    pub(super) fn new(w: &'a Worker<T>, poll: Option<Poll>) -> Self {
        let max_latency = w.timeout * 2 + Duration::from_secs(1);
        Loop {
            w,
            poll,
            stats: ThreadStats::new(max_latency, w.request.endpoints),
            interval: latency_histogram(max_latency),
            interval_responses: 0,
            interval_errors: 0,
            interval_bytes: 0,
            live: w.connections,
            paced: BinaryHeap::new(),
        }
    }

    /// Resets slot `c` for a new connection and claims the budget unit of its first
    /// request; `false` (and the slot is `Done`) when the budget is spent, so no
    /// connection is opened that could never send a request.
    pub(super) fn begin_open<S>(&mut self, c: &mut Conn<S>, now: Instant) -> bool {
        c.transport = None;
        if super::stages::rests(self.w, c, now) {
            return false;
        }
        c.parser.reset();
        c.pending = 0;
        c.sent = 0;
        c.drained = true;
        c.hup = false;
        c.tcp_up = false;
        // Requests an HTTP/2 GOAWAY left unprocessed hold their units already.
        let held = c.h2.as_ref().is_some_and(|h| h.permits > 0);
        if !c.permit && !held {
            let Some(ordinal) = self.w.budget.claim() else {
                self.finish(c);
                return false;
            };
            c.ordinal = ordinal;
            c.permit = true;
        }
        c.since = now;
        true
    }

    pub(super) fn finish<S>(&mut self, c: &mut Conn<S>) {
        c.transport = None;
        if c.phase != Phase::Done {
            c.phase = Phase::Done;
            self.live -= 1;
        }
    }

    /// A connect failed: the request it was opened for is spent as a connect error, and
    /// the slot retries after a pause.
    pub(super) fn connect_failed<S>(&mut self, c: &mut Conn<S>, e: &io::Error, now: Instant) {
        c.transport = None;
        c.permit = false;
        self.stats.connect_error(e.raw_os_error().unwrap_or(0));
        self.interval_errors += 1;
        c.phase = Phase::Retry;
        c.since = now;
    }

    /// A request in flight (to `target`) failed: count it, drop the connection, open
    /// another.
    pub(super) fn request_failed(&mut self, target: u32, kind: ErrorKind) -> Next {
        self.stats.errors[kind as usize] += 1;
        self.interval_errors += 1;
        self.stats
            .endpoint_error(self.w.request.endpoint[target as usize]);
        Next::Reopen
    }

    /// The target of the request a connection is starting: by the ordinal it claimed
    /// under `-n` (the same sequence whatever the timing), else by its own count.
    #[inline]
    pub(super) fn next_target<S>(&self, c: &mut Conn<S>) -> u32 {
        self.next_target_of(&mut c.ordinal, &mut c.seq, c.target)
    }

    /// `next_target` over a connection's parts (`last`: its previous request's target).
    #[inline]
    pub(super) fn next_target_of(&self, ordinal: &mut u64, seq: &mut u64, last: u32) -> u32 {
        let r = &self.w.request;
        if r.order.len() == 1 {
            return r.order[0];
        }
        let n = match *ordinal {
            RESEND => {
                *ordinal = UNCOUNTED;
                return last;
            }
            UNCOUNTED => {
                *seq = seq.wrapping_add(1);
                *seq
            }
            o => o,
        };
        *ordinal = UNCOUNTED;
        r.pick(n)
    }

    /// Connection set-up is done: count it and time it.
    pub(super) fn count_established<S>(&mut self, c: &Conn<S>, now: Instant) {
        self.stats.connections += 1;
        let us = us_between(c.since, now).max(1);
        self.stats.connect_time.saturating_record(us);
    }

    /// Begins the next request on an established connection, if the budget allows.
    /// In open loop, a request not yet due parks the connection in `Paced` (still `true`:
    /// the connection lives on).
    pub(super) fn start_request<S>(&mut self, c: &mut Conn<S>, now: Instant) -> bool {
        if super::stages::rests(self.w, c, now) {
            return true;
        }
        let due = &self.w.request.due_us;
        let schedule = self.w.stages.as_ref().filter(|s| s.kind == StageKind::Rate);
        if !due.is_empty() || schedule.is_some() {
            // --replay: the request's ordinal (claimed now, or with the connection) says
            // when it is due; a connection holds it, parked, until then.
            if !c.permit {
                let Some(ordinal) = self.w.budget.claim() else {
                    return false;
                };
                c.ordinal = ordinal;
                c.permit = true;
            }
            if let Some(at) =
                super::pace::due_of(self.w.start, due, self.w.stages.as_deref(), c.ordinal)
            {
                c.due = at;
            }
        }
        if self.w.pace.is_some() && c.due > now {
            c.phase = Phase::Paced;
            self.paced.push(Reverse((c.due, c.idx)));
            return true;
        }
        if !c.permit {
            let Some(ordinal) = self.w.budget.claim() else {
                return false;
            };
            c.ordinal = ordinal;
        }
        c.permit = false;
        c.target = self.next_target(c);
        c.parser.set_head(self.w.request.head(c.target));
        c.sent += 1;
        c.last = self.w.connreqs.is_some_and(|n| c.sent >= n);
        c.written = 0;
        c.got_first = false;
        c.since = now;
        c.intended = now;
        if let Some(pace) = self.w.pace {
            c.intended = c.due;
            c.due += pace;
        }
        c.phase = Phase::Writing;
        true
    }

    /// What time asks of connection `c` now (timeouts, retries).
    pub(super) fn overdue<S>(&self, c: &Conn<S>, now: Instant) -> Overdue {
        let age = now.saturating_duration_since(c.since);
        let timeout = self.w.timeout;
        match c.phase {
            Phase::Retry if age >= RETRY_AFTER => Overdue::Retry,
            Phase::Connecting if age >= timeout => Overdue::Connect,
            Phase::Writing | Phase::Reading if age >= timeout => Overdue::Request,
            Phase::Draining if age >= timeout => Overdue::Drain,
            Phase::H2 => {
                // The oldest stream in flight sets the timeout; with none in flight, the
                // time since the connection last made progress.
                let oldest =
                    c.h2.as_ref()
                        .and_then(|h| h.streams.iter().map(|s| s.since).min());
                if oldest.is_none() && self.w.pace.is_some() {
                    // Open loop: an idle connection waits for its next due time.
                    Overdue::No
                } else if now.saturating_duration_since(oldest.unwrap_or(c.since)) >= timeout {
                    Overdue::H2
                } else {
                    Overdue::No
                }
            }
            _ => Overdue::No,
        }
    }

    /// The run is over: requests on the wire when time ran out are accounted (neither
    /// response nor error), the last interval is reported, the totals returned.
    pub(super) fn end<S>(mut self, conns: &[Conn<S>], next_tick: Instant) -> ThreadStats {
        self.stats.in_flight = conns
            .iter()
            .map(|c| match c.phase {
                Phase::Reading => 1,
                Phase::Writing if c.written > 0 => 1,
                Phase::H2 => c.h2.as_ref().map_or(0, |h| h.streams.len() as u64),
                _ => 0,
            })
            .sum();
        let now = Instant::now();
        let end = self.w.deadline.map_or(now, |d| d.min(now));
        self.stats.due_unsent = conns.iter().filter(|c| c.parked_before(end)).count() as u64;
        self.stats.alt_svc_h3 = conns.iter().find_map(Conn::alt_svc_h3);
        self.tick(slice_of(self.w.start, next_tick), true);
        self.stats
    }

    /// Reports the interval that began in `slice` (of [`TICK`], counted from the start of
    /// the load).
    pub(super) fn tick(&mut self, slice: u64, last: bool) {
        let fresh = match self.w.spares.try_recv() {
            Ok(h) => h,
            Err(_) => Histogram::new_from(&self.interval),
        };
        // The receiver is gone only if the engine is unwinding; nothing to report then.
        let _ = self.w.ticks.send(Tick {
            thread: self.w.id,
            slice,
            responses: self.interval_responses,
            errors: self.interval_errors,
            bytes_read: self.interval_bytes,
            latency: std::mem::replace(&mut self.interval, fresh),
            last,
        });
        self.interval_responses = 0;
        self.interval_errors = 0;
        self.interval_bytes = 0;
    }
}
