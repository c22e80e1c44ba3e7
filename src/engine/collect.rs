//! The workers gathered into the load's results: their ticks into the timeline while
//! they run (progress, `--abort-if-behind`), their counts merged when they end, and
//! what the schedule had due that no worker claimed — shared by the TCP loops and
//! HTTP/3.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::stats::{ErrorKind, ThreadStats, Tick};
use super::timeline::TimelineBuilder;
use super::worker::{self, Budget};
use super::{errno_name, open_loop, pace, stages, Progress, ThreadEnd};
use crate::run::{
    EndpointResult, ErrorCounts, LatencySummary, LoadResults, Phases, Second, Spread, ThreadCpu,
};
use crate::spec::{Spec, Target};

/// Worker threads started, with what the engine reads from them while they run.
pub(super) struct Gathered {
    pub(super) handles: Vec<std::thread::JoinHandle<std::io::Result<ThreadEnd>>>,
    pub(super) ticks: mpsc::Receiver<Tick>,
    pub(super) spares: Vec<mpsc::Sender<hdrhistogram::Histogram<u64>>>,
    pub(super) live: Vec<Arc<worker::LiveCount>>,
    pub(super) start: Instant,
    pub(super) deadline: Option<Instant>,
    pub(super) timeout: Duration,
    pub(super) endpoints: usize,
    /// The workers' stop flag, raised by `--abort-if-behind` (as on Ctrl-C).
    pub(super) stop: Arc<std::sync::atomic::AtomicBool>,
    /// The budget the workers claimed from, and when each request was due (a schedule
    /// by request): what was due and never claimed is counted at the end.
    pub(super) budget: Arc<Budget>,
    pub(super) due_us: Arc<Vec<u64>>,
}

impl Gathered {
    /// Gathers the workers' ticks into the timeline (reporting progress) until every
    /// worker has stopped, then merges their counts into the load's results; also
    /// returns each thread's CPU.
    pub(super) fn finish(
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
