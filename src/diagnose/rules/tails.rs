//! Tails with nothing saturated: an upstream that stopped serving for moments (a
//! garbage collector's pause, a stop signal, a frozen cgroup), and a tail that no rule
//! explains, said as a finding with its distribution's numbers rather than left to
//! `concurrency-bound`'s arithmetic (a bimodal latency is never summarised by its mean).

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::run::{Finding, Kind, OffClass};

/// Stops of an upstream process (each at least [`crate::run::STALL_MS`]) from which they
/// are a finding: a pause recurs, one stop may be a debugger's.
const MIN_STOPS: usize = 2;

/// The upstream's processes stopped (state T, a stop signal; or a whole process off
/// CPU together) while the front's requests waited for it: the slow requests of the
/// run were those in flight during the stops. From the /proc sampler's (or the
/// context switches') stalls of the upstream tier's threads, lined up with the 100 ms
/// slices of the load.
pub(super) fn upstream_paused(c: &Ctx) -> Option<Finding> {
    let off = c.offcpu()?;
    let ups: Vec<i32> = c.upstream_procs().iter().map(|p| p.pid).collect();
    if ups.is_empty() {
        return None;
    }
    // One stop of the upstream: the stalls of its processes in state T, merged when
    // they overlap (a master and its worker stopped together are one pause).
    let mut stops: Vec<(f64, f64)> = off
        .stalls
        .iter()
        .filter(|s| ups.contains(&s.pid) && s.class == Some(OffClass::Stopped))
        .map(|s| (s.t_s, s.t_s + s.ms / 1e3))
        .collect();
    stops.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for (a, b) in stops {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    if merged.len() < MIN_STOPS {
        return None;
    }
    let longest_ms = merged
        .iter()
        .map(|(a, b)| (b - a) * 1e3)
        .fold(0.0, f64::max);
    let shortest_ms = merged
        .iter()
        .map(|(a, b)| (b - a) * 1e3)
        .fold(f64::INFINITY, f64::min);
    let stopped_ms: f64 = merged.iter().map(|(a, b)| (b - a) * 1e3).sum();
    let r = &c.run.results;
    let h = r.latency.decode().ok()?;
    // The requests caught by a stop waited about its length: half the shortest stop,
    // and far above the median.
    let p50 = h.value_at_quantile(0.5) as f64;
    let bar = (0.5 * shortest_ms * 1e3).max(4.0 * p50);
    let slow = h.count_between(bar as u64, h.max().max(bar as u64));
    let conns = c.run.spec.connections as f64;
    if (slow as f64) < 0.5 * conns {
        return None;
    }
    // The slices of the load inside a stop, and how many fewer responses they had.
    let inner = r
        .slices
        .get(1..r.slices.len().saturating_sub(1))
        .unwrap_or(&[]);
    let during = |t: f64| merged.iter().any(|(a, b)| t + 0.1 > *a && t < *b);
    let (mut in_stop, mut rest) = (Vec::new(), Vec::new());
    for s in inner {
        if during(s.t_ms as f64 / 1e3) {
            in_stop.push(s.responses as f64);
        } else {
            rest.push(s.responses as f64);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let empty = inner
        .iter()
        .filter(|s| s.responses == 0 && during(s.t_ms as f64 / 1e3))
        .count();
    let comm = c
        .upstream_procs()
        .first()
        .map(|p| p.comm.clone())
        .unwrap_or_default();
    let (p99, max) = (
        h.value_at_quantile(0.99) as f64 / 1e3,
        r.latency.max_us as f64 / 1e3,
    );
    let mut f = finding(
        FindingId::UpstreamPaused,
        Kind::Bottleneck,
        ramp(slow as f64 / conns, 0.5, 2.0).max(0.9),
        format!(
            "the upstream ({comm}) stopped {} times for up to {longest_ms:.0} ms while the front's requests waited for it: {slow} requests ≥ {:.0} ms, p50 {:.2} ms, max {max:.0} ms",
            merged.len(),
            bar / 1e3,
            p50 / 1e3
        ),
    );
    f.evidence = vec![
        fact(
            "upstream stops seen (state T)",
            merged.len() as f64,
            "stops",
        ),
        fact("longest stop", longest_ms, "ms"),
        fact("upstream stopped in all", stopped_ms, "ms"),
        fact("requests slower than half a stop", slow as f64, "requests"),
        fact("p50 latency", p50 / 1e3, "ms"),
        fact("p99 latency", p99, "ms"),
        fact("max latency", max, "ms"),
        fact(
            "100 ms slices inside a stop",
            in_stop.len() as f64,
            "slices",
        ),
        fact("of them without a response", empty as f64, "slices"),
        fact(
            "responses per slice inside a stop",
            mean(&in_stop),
            "responses",
        ),
        fact("responses per slice otherwise", mean(&rest), "responses"),
    ];
    f.explanation = format!(
        "The upstream's processes were seen stopped (state T, not running, not runnable) {} times, {stopped_ms:.0} ms in all, the longest {longest_ms:.0} ms, while the load kept {conns:.0} requests in flight. A request passed to it during a stop waited for the stop to end — the front's workers idle, no CPU busy, no queue full — so the latency has two modes: p50 {:.2} ms for the requests that missed the stops, {slow} requests at ≥ {:.0} ms for those caught by one (the 100 ms slices inside a stop had {:.0} responses each against {:.0} otherwise). The tail is the upstream's pauses, not the load's concurrency.",
        merged.len(),
        p50 / 1e3,
        bar / 1e3,
        mean(&in_stop),
        mean(&rest)
    );
    f.fix = "remove the pauses at their source: a JVM's collector with a pause-time goal or a concurrent one (`-XX:MaxGCPauseMillis=`, ZGC/Shenandoah), whatever sends the upstream SIGSTOP or freezes its cgroup; or give the front a second upstream and let it retry there when one stalls (nginx: two `server` lines in the `upstream` block, `proxy_next_upstream timeout;` with a `proxy_read_timeout` under the pause)".into();
    Some(f)
}

/// How far above the median the tail stands for it to be a finding: p99 at least this
/// many times p50 (a healthy server's p99 is a few times its p50)…
const TAIL_RATIO: f64 = 10.0;
/// …and at least this long: a tail of a fraction of a millisecond is the scheduler's.
const TAIL_MIN_US: f64 = 10_000.0;

/// A tail far above the median while nothing saturates, that no other rule explains
/// (beside another bottleneck it is demoted, see `diagnose`): said with the
/// distribution's numbers — the two modes, how many requests are in the slow one, when
/// they came — not as the closed loop's arithmetic, whose mean latency describes
/// neither mode.
pub(super) fn latency_tail(c: &Ctx) -> Option<Finding> {
    let run = c.run;
    let r = &run.results;
    if r.responses == 0 || r.errors.total() + r.non_2xx_3xx > r.responses / 100 {
        return None;
    }
    // Nothing saturated: the server's processes mostly idle (concurrency-bound's bar).
    let busiest = c.procs().iter().map(|p| p.cpu_pct).fold(0.0, f64::max);
    if c.ev.is_none() || busiest >= super::client::IDLE_PROC_PCT {
        return None;
    }
    let h = r.latency.decode().ok()?;
    let q = |p: f64| h.value_at_quantile(p) as f64;
    let (p50, p90, p99, p999) = (q(0.5), q(0.9), q(0.99), q(0.999));
    let max = r.latency.max_us as f64;
    // p99, or the max when the slow requests are fewer than 1 in 100 but many.
    let tail = if p99 >= TAIL_RATIO * p50 { p99 } else { p999 };
    if tail < TAIL_RATIO * p50 || tail < TAIL_MIN_US {
        return None;
    }
    // The slow mode: the requests from a third of the tail's value up.
    let bar = (tail / 3.0).max(TAIL_RATIO * p50 / 2.0);
    let slow = h.count_between(bar as u64, h.max().max(bar as u64));
    if slow < 10 {
        return None;
    }
    let share = slow as f64 / h.len().max(1) as f64;
    // When the slow ones came: in how many of the 100 ms slices (a few slices: bursts
    // of a stall; most: a share of every moment's requests).
    let slices = r.slices.len().max(1);
    let with_slow = r.slices.iter().filter(|s| s.max_us as f64 >= bar).count();
    let mut f = finding(
        FindingId::LatencyTail,
        Kind::Bottleneck,
        ramp(tail / p50.max(1.0), TAIL_RATIO, 10.0 * TAIL_RATIO),
        format!(
            "a tail with nothing saturated: p50 {:.2} ms, p99 {:.1} ms, max {:.1} ms — {slow} requests ({:.1}%) at ≥ {:.1} ms",
            p50 / 1e3,
            p99 / 1e3,
            max / 1e3,
            share * 100.0,
            bar / 1e3
        ),
    );
    f.evidence = vec![
        fact("p50 latency", p50 / 1e3, "ms"),
        fact("p90 latency", p90 / 1e3, "ms"),
        fact("p99 latency", p99 / 1e3, "ms"),
        fact("p99.9 latency", p999 / 1e3, "ms"),
        fact("max latency", max / 1e3, "ms"),
        fact("requests in the slow mode", slow as f64, "requests"),
        fact("share of the requests", share * 100.0, "%"),
        fact(
            "100 ms slices with a slow request",
            with_slow as f64,
            "slices",
        ),
        fact("slices", slices as f64, "slices"),
        fact(
            "mean latency (describes neither mode)",
            r.latency.mean_us / 1e3,
            "ms",
        ),
        fact("busiest server process CPU", busiest, "%"),
    ];
    let when = if with_slow * 4 <= slices {
        format!("they came in bursts, in {with_slow} of the {slices} slices of 100 ms: something stops now and then (a stall, a pause, a lock, a flush)")
    } else {
        format!("they came all through the run, in {with_slow} of the {slices} slices of 100 ms: a share of the requests takes another path (a cache miss, a slow query, a retry)")
    };
    f.explanation = format!(
        "Most requests took about {:.2} ms, yet {slow} ({:.1}%) took {:.1} ms or more, up to {:.1} ms, while no server process was busy (the busiest at {busiest:.0}% of a core): the latency has two modes, and its mean ({:.1} ms) describes neither; the rate it implies by Little's law is not the server's capacity either. {when}. No rule of loadlens named the cause (no blocked worker, no stopped process, no loss or retransmission timeout, no delayed ACK seen).",
        p50 / 1e3,
        share * 100.0,
        bar / 1e3,
        max / 1e3,
        r.latency.mean_us / 1e3
    );
    f.fix = "find where the slow requests wait: the per-endpoint table (`--targets`), the upstream's own request log with its times (nginx: `$upstream_response_time` in the log format), `loadlens run --profile` for the server's off-CPU stacks; a lower p99 comes from that path, not from more connections".into();
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture, with_mode};
    use crate::run::{Kind, OffClass};

    /// The upstream-pause Run: the upstream's stops, lined up with the requests they
    /// held, are the bottleneck; without the stops seen (another class, or none) or
    /// without the slow requests, nothing; after the fix, nothing.
    #[test]
    fn an_upstream_stopped_is_the_tail() {
        let run = fixture("upstream-pause-before");
        let found = crate::diagnose::diagnose(&run);
        let first = found.iter().find(|f| f.kind == Kind::Bottleneck).unwrap();
        assert_eq!(first.id, "upstream-paused", "{found:?}");
        assert!(!fires(&fixture("upstream-pause-after"), "upstream-paused"));
        let mut running = run.clone();
        for s in running
            .evidence
            .as_mut()
            .unwrap()
            .offcpu
            .as_mut()
            .unwrap()
            .stalls
            .iter_mut()
        {
            if s.class == Some(OffClass::Stopped) {
                s.class = Some(OffClass::Idle);
            }
        }
        assert!(!fires(&running, "upstream-paused"));
        // The stops without requests held by them: fewer slow ones than half the
        // connections.
        let mut unheld = run.clone();
        let mut h = crate::diagnose::testutil::histogram();
        h.record_n(2_000, 10_000).unwrap();
        unheld.results.latency = crate::run::LatencySummary::from_histogram(&h, false);
        assert!(!fires(&unheld, "upstream-paused"));
    }

    /// A run where nothing saturated and the load's concurrency set the rate (232
    /// responses at ~50 ms): with a second mode at 600 ms (12× p50) for 5% of the
    /// requests the tail is the finding; with the same mode at 4× p50, nothing; with
    /// fewer than 10 slow requests (2% of 232: 4), nothing — too few to be a mode.
    #[test]
    fn a_tail_nothing_explains_is_the_finding() {
        let run = fixture("few-connections-before");
        assert!(!fires(&run, "latency-tail"));
        let n = run.results.latency.count;
        let mut tail = run.clone();
        let mut few = run.clone();
        with_mode(&mut few.results.latency, 600_000, n / 50);
        assert!(!fires(&few, "latency-tail"));
        with_mode(&mut tail.results.latency, 600_000, n / 20);
        let found = crate::diagnose::diagnose(&tail);
        let first = found.iter().find(|f| f.kind == Kind::Bottleneck);
        assert_eq!(
            first.map(|f| f.id.as_str()),
            Some("latency-tail"),
            "{found:?}"
        );
        let f = first.unwrap();
        assert!(
            f.explanation.contains("describes neither"),
            "{}",
            f.explanation
        );
        let p50 = tail
            .results
            .latency
            .decode()
            .unwrap()
            .value_at_quantile(0.5);
        let mut mild = run.clone();
        with_mode(&mut mild.results.latency, 4 * p50, n / 20);
        assert!(!fires(&mild, "latency-tail"));
        // Beside another bottleneck it is left out.
        let mut blocked = fixture("blocking-log-before");
        let m = blocked.results.latency.count;
        with_mode(&mut blocked.results.latency, 300_000, m / 20);
        assert!(!fires(&blocked, "latency-tail"));
    }
}
