//! HTTP/3 over QUIC (`--h3`). The closed loop (no pacing, `--connreqs` or 0-RTT) runs
//! on quinn-proto in the worker's own loop (`direct.rs`: a quarter less client CPU per
//! response). The rest: each worker thread runs a current-thread tokio runtime
//! with one quinn endpoint (one UDP socket; quinn-udp sends with GSO and receives with
//! GRO where the kernel offers them) carrying its share of the connections, each with up
//! to `--max-concurrent-streams` requests in flight, every stream a task that sends its
//! request, reads the response and records it.
//!
//! DESIGN: QUIC is a protocol stack (loss recovery, congestion control, packet
//! protection, stream flow control) far larger than HTTP/2's framing, and quinn is the
//! maintained one in Rust on the rustls and ring the TCP engine already uses: the TLS
//! configuration is the same (`transport::TlsConfig`, with ALPN `h3`). The engine's
//! bookkeeping is shared with the TCP loops: the `-n` budget and its ordinals (a
//! `--targets` mix picks each request's target by them), the per-thread `ThreadStats`
//! and HdrHistograms on the same `Instant` clock, the 100 ms ticks of the timeline, and
//! the workers gathered by `Gathered::finish`. A request is counted once: as a
//! response, as an error of its class, or as in flight when the run ended.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;

mod direct;
mod qpack_table;
mod quic;
mod resume;
mod setup;
mod stream;
mod udp;
mod wire;

use super::stats::{latency_histogram, us_between, ThreadStats, Tick};
use super::worker::{slice_of, Budget, LiveCount, TICK};
use super::{
    client_check, pace, quota_before, quota_over, spawn_worker, stages, Gathered, Outcome, Progress,
};
use crate::spec::{Requests, Resume, Spec, Stages, Target};
use quic::QuicSum;
use resume::Handshake;
use setup::{build_requests, client_config, endpoint_for, probe, H3Config, H3Request};

/// A connection whose handshake failed waits this long before trying again.
const RETRY_AFTER: Duration = Duration::from_millis(20);
/// How often the stop flag and the deadline are checked.
const WATCH: Duration = Duration::from_millis(10);
/// H3_NO_ERROR: the code a connection is closed with when its requests are done.
pub(super) const H3_NO_ERROR: u32 = 0x100;

/// Runs the load over HTTP/3.
pub(super) fn run(
    spec: &Spec,
    target: &Target,
    addr: SocketAddr,
    body: &[u8],
    stop: Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> anyhow::Result<Outcome> {
    let requests = Arc::new(build_requests(spec, target, body)?);
    let cfg = client_config(spec, target)?;
    let timeout = spec.timeout();
    probe(&cfg, addr, &target.host, timeout)?;
    // The order table (which target each request is) and the endpoints' numbering, as
    // the TCP loops use them; the HTTP/1.1 bytes themselves are not sent.
    let order = Arc::new(Requests::build(spec, target, &[]));
    // Open loop (`-R`, `--replay` at a speed): the TCP engine's schedule.
    let pace = pace::connection_pace(spec, &order.due_us);
    let streams = spec.max_concurrent_streams;
    let budget = Arc::new(Budget::new(spec.requests.or(stages::budget(spec))));
    let rate_stages = stages::rate_stages(spec).cloned().map(Arc::new);
    let threads = spec.threads as usize;
    let max = timeout * 2 + Duration::from_secs(1);
    let (tx, rx) = mpsc::channel::<Tick>();
    let quic = Arc::new(Mutex::new(QuicSum::default()));
    let quota = quota_before();
    let start = Instant::now();
    let deadline = spec.duration_s.map(|d| start + Duration::from_secs_f64(d));

    let mut handles = Vec::with_capacity(threads);
    let live: Vec<Arc<LiveCount>> = (0..threads).map(|_| Arc::default()).collect();
    let mut spares = Vec::with_capacity(threads);
    for (id, live) in live.iter().enumerate() {
        let share = spec.connections as usize / threads
            + usize::from(id < spec.connections as usize % threads);
        let (give, take) = mpsc::channel();
        spares.push(give);
        let w = H3Worker {
            id,
            connections: share,
            addr,
            host: target.host.clone(),
            cfg: cfg.clone(),
            requests: requests.clone(),
            order: order.clone(),
            streams,
            connreqs: spec.connreqs,
            zero_rtt: spec.resume == Resume::ZeroRtt,
            pace,
            stages: rate_stages.clone(),
            timeout,
            start,
            deadline,
            budget: budget.clone(),
            stop: stop.clone(),
            ticks: tx.clone(),
            spares: take,
            live: live.clone(),
            quic: quic.clone(),
        };
        handles.push(spawn_worker(id, start, move || w.run())?);
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
        endpoints: order.endpoints,
        stop: stop.clone(),
        budget,
        due_us: order.due_us.clone(),
    };
    let (mut results, cpus) = gathered.finish(spec, target, progress)?;
    results.protocol = "h3".into();
    results.streams_per_connection = streams;
    let sum = std::mem::take(&mut *quic.lock().expect("no worker panicked"));
    results.quic = Some(sum.into_stats(max));
    if let Some(p) = results.phases.as_mut() {
        // QUIC has no TCP connect: its handshake (TLS 1.3 inside QUIC) is the set-up.
        p.tls_handshake = Some(results.connect_time.clone());
    }
    Ok(Outcome {
        results,
        client: client_check(cpus, quota_over(quota)),
    })
}

/// Everything an HTTP/3 worker thread needs, moved into it.
struct H3Worker {
    id: usize,
    connections: usize,
    addr: SocketAddr,
    host: String,
    cfg: H3Config,
    requests: Arc<Vec<H3Request>>,
    order: Arc<Requests>,
    streams: u32,
    connreqs: Option<u32>,
    /// `--resume 0rtt`: requests sent in 0-RTT early data when the session allows.
    zero_rtt: bool,
    /// Open loop: each connection slot sends a request every `pace`, or each request
    /// at its own due time (`pace::due_of`); latency counts from when it was due.
    pace: Option<Duration>,
    /// Rate stages (`--stages 30s:100,…`): request k is due at the schedule's k-th
    /// moment.
    stages: Option<Arc<Stages>>,
    timeout: Duration,
    start: Instant,
    deadline: Option<Instant>,
    budget: Arc<Budget>,
    stop: Arc<AtomicBool>,
    ticks: Sender<Tick>,
    spares: Receiver<Histogram<u64>>,
    live: Arc<LiveCount>,
    quic: Arc<Mutex<QuicSum>>,
}

/// A worker's counts, shared by its tasks (all on its one thread).
struct Counts {
    stats: ThreadStats,
    interval: Histogram<u64>,
    interval_responses: u64,
    interval_errors: u64,
    interval_bytes: u64,
    /// Requests sent and not yet answered or failed.
    in_flight: u64,
    /// When each request claimed in open loop and not yet sent is due: one due before
    /// the deadline whose task had not run by then (a starved machine) was still the
    /// client's at the end, counted in flight, not lost.
    waiting: Vec<Instant>,
    quic: QuicSum,
}

impl Counts {
    /// Nothing counted yet; latencies up to `max` for `endpoints` endpoints.
    fn new(max: Duration, endpoints: usize) -> Counts {
        Counts {
            stats: ThreadStats::new(max, endpoints),
            interval: latency_histogram(max),
            interval_responses: 0,
            interval_errors: 0,
            interval_bytes: 0,
            in_flight: 0,
            waiting: Vec::new(),
            quic: QuicSum::default(),
        }
    }
}

/// A worker's state, shared by its tasks.
struct Ctx {
    w: H3Worker,
    c: RefCell<Counts>,
    /// The connections open now, by slot, so their QUIC counters are read when the run
    /// ends with them open.
    open: RefCell<Vec<Option<quinn::Connection>>>,
    max: Duration,
}

/// One open connection's state, shared by its stream tasks.
struct Open {
    /// h3's handle: the connection's HTTP/3 session (control and QPACK streams, the
    /// server's SETTINGS and GOAWAY) lasts while it is held. Requests go on streams
    /// of their own (`wire.rs`), not through it.
    _send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    /// Requests this connection may still send (`--connreqs`).
    left: Cell<u64>,
    /// Budget claims held for this connection: the one claimed before connecting, and
    /// any whose request could not be sent on the slot's previous connection.
    held: RefCell<Vec<u64>>,
    /// Without `-n`: the slot's own count, which walks a mix's order.
    seq: Cell<u64>,
    /// Open loop: when the slot's next request is due.
    due: Cell<Instant>,
    quic: quinn::Connection,
}

impl H3Worker {
    fn run(self) -> std::io::Result<ThreadStats> {
        // The closed loop runs on quinn-proto in the worker's own loop (`direct.rs`);
        // LOADLENS_H3_QUINN=1 keeps it on quinn's tasks (bench/h3-cost compares them).
        if std::env::var_os("LOADLENS_H3_QUINN").is_none()
            && self.pace.is_none()
            && self.connreqs.is_none()
            && !self.zero_rtt
        {
            return self.run_direct();
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let local = tokio::task::LocalSet::new();
        let max = self.timeout * 2 + Duration::from_secs(1);
        let endpoints = self.order.endpoints;
        let slots = self.connections;
        let ctx = Rc::new(Ctx {
            c: RefCell::new(Counts::new(max, endpoints)),
            open: RefCell::new(vec![None; slots]),
            w: self,
            max,
        });
        let endpoint = rt.block_on(async { endpoint_for(ctx.w.addr) })?;
        let next_tick = local.block_on(&rt, {
            let ctx = ctx.clone();
            let endpoint = endpoint.clone();
            async move {
                let all = {
                    let ctx = ctx.clone();
                    async move {
                        let tasks: Vec<_> = (0..slots)
                            .map(|i| {
                                tokio::task::spawn_local(slot(ctx.clone(), endpoint.clone(), i))
                            })
                            .collect();
                        for t in tasks {
                            let _ = t.await;
                        }
                    }
                };
                let ticker = ticker(ctx.clone());
                tokio::pin!(all);
                tokio::pin!(ticker);
                tokio::select! {
                    _ = &mut all => next_tick_after(ctx.w.start, Instant::now()),
                    t = &mut ticker => t,
                }
            }
        });
        // The connections still open when the run ended: their counters, then a close
        // the server sees at once.
        for conn in ctx.open.borrow_mut().iter_mut().filter_map(Option::take) {
            conn.close(H3_NO_ERROR.into(), b"");
            ctx.c.borrow_mut().quic.add(&conn.stats(), ctx.max);
        }
        rt.block_on(async {
            let _ = tokio::time::timeout(Duration::from_millis(100), endpoint.wait_idle()).await;
        });
        {
            // The tasks left (requests in flight at the deadline) are dropped unfinished.
            let _in_runtime = rt.enter();
            drop(local);
        }
        drop(endpoint);
        drop(rt);
        let ctx = Rc::try_unwrap(ctx).ok().expect("the tasks have ended");
        let mut c = ctx.c.into_inner();
        // Requests on the wire when time ran out: accounted, neither response nor error;
        // and those claimed, due before the end, whose task had not run by then (a starved
        // machine): the client's, behind its schedule.
        let now = Instant::now();
        let end = ctx.w.deadline.map_or(now, |d| d.min(now));
        c.stats.in_flight = c.in_flight;
        c.stats.due_unsent = c.waiting.iter().filter(|&&at| at < end).count() as u64;
        ctx.w
            .quic
            .lock()
            .expect("no worker panicked")
            .merge(std::mem::take(&mut c.quic));
        tick(&ctx.w, &mut c, slice_of(ctx.w.start, next_tick), true);
        Ok(c.stats)
    }
}

/// The end of the 100 ms slice `now` falls in.
fn next_tick_after(start: Instant, now: Instant) -> Instant {
    let n = now.saturating_duration_since(start).as_nanos() / TICK.as_nanos() + 1;
    start + TICK * n as u32
}

/// Sends the interval that began in `slice` to the engine.
fn tick(w: &H3Worker, c: &mut Counts, slice: u64, last: bool) {
    let fresh = match w.spares.try_recv() {
        Ok(h) => h,
        Err(_) => Histogram::new_from(&c.interval),
    };
    let _ = w.ticks.send(Tick {
        thread: w.id,
        slice,
        responses: c.interval_responses,
        errors: c.interval_errors,
        bytes_read: c.interval_bytes,
        latency: std::mem::replace(&mut c.interval, fresh),
        last,
    });
    c.interval_responses = 0;
    c.interval_errors = 0;
    c.interval_bytes = 0;
}

/// The timeline's ticks and the live counts, until the deadline or the stop flag ends
/// the run; returns the end of the slice then under way.
async fn ticker(ctx: Rc<Ctx>) -> Instant {
    let w = &ctx.w;
    let mut next_tick = w.start + TICK;
    loop {
        let now = Instant::now();
        if w.stop.load(Ordering::Relaxed) || w.deadline.is_some_and(|d| now >= d) {
            return next_tick;
        }
        if now >= next_tick {
            let mut c = ctx.c.borrow_mut();
            tick(w, &mut c, slice_of(w.start, next_tick), false);
            while next_tick <= now {
                next_tick += TICK;
            }
        }
        {
            let c = ctx.c.borrow();
            w.live.publish(&c.stats);
        }
        let mut wake = next_tick.min(now + WATCH);
        if let Some(d) = w.deadline {
            wake = wake.min(d);
        }
        tokio::time::sleep_until(wake.into()).await;
    }
}

/// One connection slot: a QUIC connection at a time, replaced when it has sent its
/// `--connreqs` or failed, until the budget is spent.
async fn slot(ctx: Rc<Ctx>, endpoint: quinn::Endpoint, i: usize) {
    let w = &ctx.w;
    let mut carried: Vec<u64> = Vec::new();
    let mut seq = (w.id as u64) << 32 | (i as u64 * 7919);
    let mut due = pace::first_due(w.start, w.pace, i, w.connections);
    loop {
        // A claim before connecting: no connection is opened that could never send.
        let first = match carried.pop() {
            Some(o) => o,
            None => match w.budget.claim() {
                Some(o) => o,
                None => return,
            },
        };
        let began = Instant::now();
        let conn = match connect(&ctx, &endpoint, began).await {
            Ok(c) => c,
            Err(errno) => {
                // The request it was opened for is spent as a connect error.
                ctx.c.borrow_mut().connect_failed(errno);
                tokio::time::sleep(RETRY_AFTER).await;
                continue;
            }
        };
        let (mut driver, send) =
            match h3::client::new(h3_quinn::Connection::new(conn.clone())).await {
                Ok(x) => x,
                Err(_) => {
                    ctx.c.borrow_mut().connect_failed(libc::EPROTO);
                    ctx.c.borrow_mut().quic.add(&conn.stats(), ctx.max);
                    tokio::time::sleep(RETRY_AFTER).await;
                    continue;
                }
            };
        {
            let mut c = ctx.c.borrow_mut();
            c.stats.connections += 1;
            let us = us_between(began, Instant::now()).max(1);
            c.stats.connect_time.saturating_record(us);
        }
        ctx.open.borrow_mut()[i] = Some(conn.clone());
        let drive = tokio::task::spawn_local(async move {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let mut held = carried.split_off(0);
        held.push(first);
        let open = Rc::new(Open {
            _send: send,
            left: Cell::new(w.connreqs.map_or(u64::MAX, u64::from)),
            held: RefCell::new(held),
            seq: Cell::new(seq),
            due: Cell::new(due),
            quic: conn.clone(),
        });
        let tasks: Vec<_> = (0..w.streams)
            .map(|_| tokio::task::spawn_local(stream::stream(ctx.clone(), open.clone())))
            .collect();
        for t in tasks {
            if let Ok(mut unsent) = t.await {
                carried.append(&mut unsent);
            }
        }
        carried.append(&mut open.held.borrow_mut());
        seq = open.seq.get();
        due = open.due.get();
        conn.close(H3_NO_ERROR.into(), b"");
        drive.abort();
        ctx.open.borrow_mut()[i] = None;
        ctx.c.borrow_mut().quic.add(&conn.stats(), ctx.max);
    }
}

/// A QUIC handshake within the timeout, its kind and time counted; Err(errno) when it
/// failed. With `--resume 0rtt` and a ticket that allows it, the connection is returned
/// at once (its requests go out as 0-RTT data) and its handshake counted when it ends.
async fn connect(
    ctx: &Rc<Ctx>,
    endpoint: &quinn::Endpoint,
    began: Instant,
) -> Result<quinn::Connection, i32> {
    let w = &ctx.w;
    let (cfg, certificate) = w.cfg.connection();
    let mut connecting = endpoint
        .connect_with(cfg, w.addr, &w.host)
        .map_err(|_| libc::EINVAL)?;
    if w.zero_rtt {
        match connecting.into_0rtt() {
            Ok((conn, accepted)) => {
                let (ctx, c) = (ctx.clone(), conn.clone());
                tokio::task::spawn_local(async move {
                    let accepted = accepted.await;
                    // A handshake that failed is counted as a connection error instead.
                    if accepted || c.close_reason().is_none() {
                        let kind = Handshake::of(certificate.load(Ordering::Relaxed), accepted);
                        let us = us_between(began, Instant::now());
                        ctx.c.borrow_mut().quic.handshake(kind, us, ctx.max);
                    }
                });
                return Ok(conn);
            }
            Err(c) => connecting = c,
        }
    }
    match tokio::time::timeout(w.timeout, connecting).await {
        Err(_) => Err(libc::ETIMEDOUT),
        Ok(Err(quinn::ConnectionError::TimedOut)) => Err(libc::ETIMEDOUT),
        Ok(Err(quinn::ConnectionError::ConnectionClosed(_))) => Err(libc::ECONNREFUSED),
        Ok(Err(quinn::ConnectionError::Reset)) => Err(libc::ECONNRESET),
        Ok(Err(_)) => Err(libc::EPROTO),
        Ok(Ok(c)) => {
            let kind = Handshake::of(certificate.load(Ordering::Relaxed), false);
            let us = us_between(began, Instant::now());
            ctx.c.borrow_mut().quic.handshake(kind, us, ctx.max);
            Ok(c)
        }
    }
}
