//! HTTP behaviour: Nagle and delayed ACK, error responses.

use super::{fact, finding, ramp, Ctx};
use crate::run::{Finding, Kind};

/// A ~40 ms latency mode on keep-alive: Nagle's algorithm waiting for a delayed ACK.
pub(super) fn nagle_delayed_ack(c: &Ctx) -> Option<Finding> {
    let h = c.run.results.latency.decode().ok()?;
    if h.is_empty() {
        return None;
    }
    let count = |lo: u64, hi: u64| -> u64 {
        h.iter_recorded()
            .filter(|v| (lo..=hi).contains(&v.value_iterated_to()))
            .map(|v| v.count_since_last_iteration())
            .sum()
    };
    let in_mode = count(36_000, 48_000);
    // A mode, not a broad tail: the 40 ms window must stand well above its neighbours.
    let around = count(24_000, 35_999).max(count(48_001, 60_000));
    let share = in_mode as f64 / h.len() as f64;
    if share < 0.05 || in_mode < 3 * around || h.value_at_quantile(0.5) >= 30_000 {
        return None;
    }
    let mut f = finding(
        "nagle-delayed-ack",
        Kind::Warning,
        ramp(share, 0.05, 0.3),
        "a ~40 ms latency mode: Nagle waiting for a delayed ACK".into(),
    );
    f.evidence = vec![
        fact("requests between 36 and 48 ms", in_mode as f64, "requests"),
        fact("share of requests", share * 100.0, "%"),
    ];
    f.explanation = "When a response (or request) leaves in two writes, Nagle's algorithm holds the second until the first is ACKed, and the peer delays that ACK by ~40 ms.".into();
    f.fix = "`tcp_nodelay on;` (nginx default for keep-alive) and send each message in one write (`postpone_output`, `tcp_nopush` with `sendfile`)".into();
    Some(f)
}

/// Non-2xx/3xx responses dominate: requests/s counts failures.
pub(super) fn http_errors(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    let share = r.non_2xx_3xx as f64 / r.responses.max(1) as f64;
    if r.responses == 0 || share < 0.5 {
        return None;
    }
    let top = r
        .status_codes
        .iter()
        .filter(|(k, _)| !(200..400).contains(*k))
        .max_by_key(|(_, v)| **v)
        .map(|(k, _)| *k)
        .unwrap_or(0);
    let mut f = finding(
        "http-errors",
        Kind::Warning,
        ramp(share, 0.5, 0.95),
        format!(
            "{:.0}% of responses were errors (mostly {top}): requests/s counts failures",
            share * 100.0
        ),
    );
    f.evidence = vec![
        fact("non-2xx/3xx responses", r.non_2xx_3xx as f64, "responses"),
        fact("share", share * 100.0, "%"),
        fact("most common error status", top as f64, "status"),
    ];
    f.explanation = "Error responses are usually cheaper than real ones, so the request rate of this run overstates what the server can do for real requests.".into();
    f.fix = "fix the errors first (the server's error log says why), then measure again".into();
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture, histogram};

    #[test]
    fn nagle_delayed_ack() {
        let mut run = fixture("healthy-before");
        let with_mode = |share_40ms: f64| {
            let mut h = histogram();
            let n = 10_000u64;
            let slow = (n as f64 * share_40ms) as u64;
            h.record_n(500, n - slow).unwrap();
            if slow > 0 {
                h.record_n(40_000, slow).unwrap();
            }
            crate::run::LatencySummary::from_histogram(&h, false)
        };
        run.results.latency = with_mode(0.2);
        assert!(fires(&run, "nagle-delayed-ack"));
        run.results.latency = with_mode(0.02);
        assert!(!fires(&run, "nagle-delayed-ack"));
    }

    #[test]
    fn a_broad_tail_is_not_a_nagle_mode() {
        let mut run = fixture("healthy-before");
        let mut h = histogram();
        h.record_n(1_000, 8_000).unwrap();
        // 20–80 ms spread evenly: 10% of requests fall near 40 ms, but there is no peak.
        for ms in 20..80u64 {
            h.record_n(ms * 1000, 33).unwrap();
        }
        run.results.latency = crate::run::LatencySummary::from_histogram(&h, false);
        assert!(!fires(&run, "nagle-delayed-ack"));
    }
}
