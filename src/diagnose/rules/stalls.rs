//! Event-loop stalls: a worker that stopped serving for a moment.

use super::{fact, finding, ramp, Ctx};
use crate::run::{Finding, Kind};

/// The evidence naming how often the samples caught a worker blocked (read by the
/// table of causes: a blocked worker is a stall whatever else happened).
pub(super) const SEEN_BLOCKED: &str = "samples with a worker stopped or in disk wait";

/// Latency spikes that hit many connections at once while the server is not overloaded:
/// the event loop stopped (a blocking call, a stopped process).
pub(super) fn event_loop_stall(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    // Listen-queue drops and retransmissions also make slow requests; not a stall.
    if c.counter("TcpExt.ListenOverflows") > 0 || r.errors.timeout > 0 {
        return None;
    }
    // A worker out of fds or connections stops accepting while it serves what it
    // holds: new connections wait in the accept queue and fail — slow requests, but a
    // limit (fd-limit, connection-limit), not a stopped loop.
    if c.fd_fill().is_some_and(|(_, f)| f >= 0.9)
        || c.worker_connections_fill()
            .is_some_and(|(_, fds, limit)| fds as f64 >= 0.9 * limit as f64)
        || c.log("too-many-open-files").is_some()
        || c.log("worker-connections-not-enough").is_some()
        || c.log("max-request-workers-reached").is_some()
    {
        return None;
    }
    let failed = r.errors.read + r.errors.connect;
    if failed as f64 > 0.01 * r.responses.max(1) as f64 {
        return None;
    }
    let h = r.latency.decode().ok()?;
    let p50 = h.value_at_quantile(0.5) as f64;
    let p99 = h.value_at_quantile(0.99) as f64;
    // A spike far outside the normal spread: ≥ 50 ms, ≥ 20× the median and ≥ 10× p99.
    // (A busy server's slow tail — time-wait's expensive connects — is not a stall.)
    let threshold = (20.0 * p50).max(10.0 * p99).max(50_000.0);
    let slow: u64 = h
        .iter_recorded()
        .filter(|v| v.value_iterated_to() as f64 >= threshold)
        .map(|v| v.count_since_last_iteration())
        .sum();
    // Not only the first second: every connection opening at once (handshakes, the
    // accept burst) makes a start-up spike that is not the loop stopping. Require a
    // spike in a later second too (a stall recurs; a run of one second cannot tell).
    let later_spike = c
        .run
        .results
        .timeline
        .iter()
        .any(|s| s.t_s >= 1 && s.max_us as f64 >= threshold);
    if !later_spike {
        return None;
    }
    let conns = c.run.spec.connections as f64;
    // At least half the connections hit at once, yet a small share of all requests.
    if (slow as f64) < 0.5 * conns || slow as f64 > 0.02 * h.len() as f64 {
        return None;
    }
    let stalls = slow as f64 / conns;
    let stopped =
        c.ev.map(|e| {
            e.samples
                .iter()
                .flat_map(|s| s.processes.iter())
                .filter(|p| p.state == "T" || p.state == "D")
                .count()
        })
        .unwrap_or(0);
    let mut f = finding(
        "event-loop-stall",
        Kind::Bottleneck,
        ramp(stalls, 0.5, 3.0).max(if stopped > 0 { 0.9 } else { 0.0 }),
        format!(
            "server event loop stalls: {slow} requests ≥ {:.0} ms at once",
            threshold / 1e3
        ),
    );
    f.evidence = vec![
        fact("requests slower than threshold", slow as f64, "requests"),
        fact("threshold", threshold / 1e3, "ms"),
        fact("p50 latency", p50 / 1e3, "ms"),
        fact("max latency", r.latency.max_us as f64 / 1e3, "ms"),
        fact("connections", conns, "connections"),
        fact(SEEN_BLOCKED, stopped as f64, "samples"),
    ];
    f.explanation = "Many connections were delayed by the same long pause while the median stayed fast: the worker's event loop stopped serving every connection it holds at once — a blocking call (log reopen, disk read), a stopped or throttled process.".into();
    f.fix = "find what blocks the worker (`strace -T -p PID`, `perf trace`, off-CPU profile); buffer logs (`access_log ... buffer=64k flush=1s`), use `aio threads` for disk".into();
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};

    /// Slow requests from a worker at its fd limit, or from connections failing, are
    /// not a stopped event loop.
    #[test]
    fn a_worker_at_a_limit_is_not_a_stall() {
        let run = fixture("event-loop-stall-before");
        assert!(fires(&run, "event-loop-stall"));
        let mut at_limit = run.clone();
        for p in at_limit
            .evidence
            .as_mut()
            .unwrap()
            .window
            .processes
            .iter_mut()
        {
            p.fds_max = Some(1000);
            p.fd_limit = Some(1024);
        }
        assert!(!fires(&at_limit, "event-loop-stall"));
        assert!(fires(&at_limit, "fd-limit"));
        let mut failing = run.clone();
        failing.results.errors.read = failing.results.responses / 20;
        assert!(!fires(&failing, "event-loop-stall"));
    }

    /// Regression (worker-connections after its fix): 200 connections opening at once
    /// made 132 requests of the first second slow; no later second was.
    #[test]
    fn a_start_up_spike_is_not_a_stall() {
        let run = fixture("worker-connections-after");
        assert!(!fires(&run, "event-loop-stall"));
        let mut only_first = fixture("event-loop-stall-before");
        for s in only_first
            .results
            .timeline
            .iter_mut()
            .filter(|s| s.t_s >= 1)
        {
            s.max_us = s.p99_us;
        }
        assert!(!fires(&only_first, "event-loop-stall"));
    }
}
