//! Upstreams behind a proxy (php-fpm, a backend) as the limit.

use super::{fact, finding, ramp, Ctx};
use crate::run::{Finding, Kind};

/// The proxy answers 5xx or the client times out while an upstream's accept queue
/// (TCP or unix, e.g. php-fpm's socket) holds requests: the upstream is the limit.
pub(super) fn upstream_saturated(c: &Ctx) -> Option<Finding> {
    let e = c.ev?;
    let r = &c.run.results;
    let failed = r.errors.timeout
        + r.status_codes
            .iter()
            .filter(|(k, _)| matches!(**k, 499 | 502 | 503 | 504))
            .map(|(_, v)| *v)
            .sum::<u64>();
    let port = c.run.target_addr.rsplit(':').next().unwrap_or("");
    let upstream_q = e
        .window
        .listen_queues
        .iter()
        .filter(|q| !q.addr.ends_with(&format!(":{port}")))
        .max_by_key(|q| q.max_queue)?;
    let attempts = (r.responses + failed).max(1);
    if failed == 0 || (failed as f64) < 0.01 * attempts as f64 || upstream_q.max_queue < 5 {
        return None;
    }
    let mut f = finding(
        "upstream-saturated",
        Kind::Bottleneck,
        ramp(upstream_q.max_queue as f64, 5.0, 50.0).max(ramp(
            failed as f64 / attempts as f64,
            0.01,
            0.3,
        )),
        format!("upstream saturated: requests queue at {}", upstream_q.addr),
    );
    f.evidence = vec![
        fact("timeouts and 499/502/503/504", failed as f64, "requests"),
        fact("responses", r.responses as f64, "responses"),
        fact(
            "upstream accept queue max",
            upstream_q.max_queue as f64,
            "connections",
        ),
        fact("upstream backlog", upstream_q.backlog as f64, "connections"),
    ];
    let busy: Vec<&str> = e
        .topology
        .processes
        .iter()
        .filter(|p| p.comm.starts_with("php-fpm"))
        .map(|p| p.comm.as_str())
        .collect();
    f.explanation = "Requests waited in the upstream's accept queue because all its workers were busy; the front server waited on them until the client gave up (nginx logs 499) or its own timeout answered 502/504. Throughput is set by upstream workers × 1/request time.".into();
    f.fix = if busy.is_empty() {
        "add upstream capacity (more worker processes or servers), or make the upstream's requests faster".into()
    } else {
        "raise php-fpm's `pm.max_children` (its log says \"server reached pm.max_children\") as far as memory allows, or make the script faster".into()
    };
    Some(f)
}
