//! Upstreams behind a proxy (php-fpm, a backend) as the limit.

use super::{fact, finding, logged, ramp, Ctx, FindingId};
use crate::run::{Finding, Kind, Role};

/// An upstream behind the front (php-fpm, a backend) is the limit when requests wait
/// in its accept queue (TCP or unix, e.g. php-fpm's socket) and either the front fails
/// them (client timeouts, 499/502/503/504) or they wait there for most of the run (no
/// failures: the upstream's workers set the pace, as at a sweep's knee). The servers'
/// logs confirm it ("server reached pm.max_children", "upstream timed out").
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
        .max_by_key(|q| (q.samples_queued, q.max_queue));
    let max_children = logged(c, "max-children-reached");
    let timed_out = logged(c, "upstream-timed-out");
    let attempts = (r.responses + failed).max(1);
    let fail_share = failed as f64 / attempts as f64;
    let queued = upstream_q.map(|q| q.max_queue).unwrap_or(0);
    let queued_share = upstream_q
        .map(|q| q.samples_queued as f64 / q.samples.max(1) as f64)
        .unwrap_or(0.0);
    let failing =
        fail_share >= 0.01 && (queued >= 5 || max_children.is_some() || timed_out.is_some());
    // Waiting in most samples, a few deep: the upstream's workers are all busy.
    let backlogged = queued_share >= 0.5 && queued >= 3;
    if !failing && !backlogged {
        return None;
    }
    let mut conf = if failing {
        ramp(queued as f64, 5.0, 50.0).max(ramp(fail_share, 0.01, 0.3))
    } else {
        ramp(queued_share, 0.5, 1.0).min(0.8)
    };
    if max_children.is_some() || timed_out.is_some() {
        conf = conf.max(0.9);
    }
    let ups = c.upstream_procs();
    let upstream_comm = ups.first().map(|p| p.comm.clone()).or_else(|| {
        e.topology
            .processes
            .iter()
            .find(|p| p.kind == crate::kinds::php_fpm::KIND)
            .map(|p| p.comm.clone())
    });
    let workers = ups.iter().filter(|p| p.role == Role::Worker).count();
    let at = match (upstream_q, &upstream_comm) {
        (Some(q), Some(comm)) if workers > 0 => format!("{} ({comm}, {workers} workers)", q.addr),
        (Some(q), Some(comm)) => format!("{} ({comm})", q.addr),
        (Some(q), None) => q.addr.clone(),
        (None, Some(comm)) => comm.clone(),
        (None, None) => "the upstream".into(),
    };
    let busy: f64 = ups
        .iter()
        .filter(|p| p.role == Role::Worker)
        .map(|p| p.cpu_pct)
        .sum();
    // Workers that compute (not wait on a database, a sleep, the disk) most of the
    // time — running or waiting for a CPU, so a busy machine does not hide it: more of
    // them only helps while there are CPUs to run them.
    let demand: f64 = ups
        .iter()
        .filter(|p| p.role == Role::Worker)
        .map(|p| p.cpu_demand_pct())
        .sum();
    let computing = workers > 0 && demand / workers as f64 >= 60.0;
    let cpus = c.server_cpus();
    let cpu_bound = computing && workers as u32 >= cpus;
    let mut f = finding(
        FindingId::UpstreamSaturated,
        Kind::Bottleneck,
        conf,
        format!("upstream saturated: requests queue at {at}"),
    );
    // One process at its CPU's limit (a single-threaded server): the upstream's
    // capacity is that CPU, whatever queues and retries follow from it.
    // (Computing by the rule's own bar above: running or waiting for a CPU ≥ 60% of
    // the time; the rest is the gaps a full queue's dropped handshakes leave it.)
    let one_cpu = ups
        .iter()
        .filter(|p| c.worker_load_pct(p) >= 60.0)
        .max_by(|a, b| c.worker_load_pct(a).total_cmp(&c.worker_load_pct(b)));
    if cpu_bound {
        f.title
            .push_str(&format!(", its {workers} workers computing on {cpus} CPUs"));
    } else if let Some(p) = one_cpu.filter(|_| ups.len() <= 2) {
        f.title.push_str(&format!(
            ", its CPU the limit: {} at {:.0}% of {} core{}",
            p.label(),
            c.worker_load_pct(p),
            c.worker_cores(p),
            if c.worker_cores(p) > 1.0 { "s" } else { "" }
        ));
        f.evidence.push(fact(
            "upstream's busiest process CPU",
            c.worker_load_pct(p).round(),
            "% of its cores",
        ));
    }
    f.evidence = vec![
        fact("timeouts and 499/502/503/504", failed as f64, "requests"),
        fact("responses", r.responses as f64, "responses"),
    ];
    if let Some(q) = upstream_q {
        f.evidence.extend([
            fact(
                "upstream accept queue max",
                q.max_queue as f64,
                "connections",
            ),
            fact(
                "samples with requests waiting upstream",
                (queued_share * 100.0).round(),
                "%",
            ),
            fact("upstream backlog", q.backlog as f64, "connections"),
        ]);
    }
    if workers > 0 {
        f.evidence
            .push(fact("upstream workers", workers as f64, "processes"));
        f.evidence
            .push(fact("upstream workers' CPU", busy.round(), "% of a core"));
    }
    f.explanation = "Requests waited in the upstream's accept queue because all its workers were busy; the front server waited on them until the client gave up (nginx logs 499) or its own timeout answered 502/504. Throughput is set by upstream workers × 1/request time.".into();
    for (_, fact, quote) in [max_children.clone(), timed_out].into_iter().flatten() {
        f.evidence.push(fact);
        f.explanation.push_str(&quote);
    }
    let php = c.upstream_kind() == crate::kinds::php_fpm::KIND
        || e.topology
            .processes
            .iter()
            .any(|p| p.kind == crate::kinds::php_fpm::KIND);
    f.fix = if php || max_children.is_some() {
        // "server reached pm.max_children setting (5), consider raising it"
        let now = c
            .log("max-children-reached")
            .and_then(|(_, l)| {
                l.split("setting (")
                    .nth(1)?
                    .split(')')
                    .next()
                    .map(String::from)
            })
            .map(|n| format!(" (now {n})"))
            .unwrap_or_default();
        if cpu_bound {
            format!("the children compute: {busy:.0}% of a core across {workers} of them on {cpus} CPUs, so raising `pm.max_children`{now} will not help; make the script faster (opcache on, profile it) or add CPUs or servers")
        } else if computing {
            format!("raise php-fpm's `pm.max_children`{now} to at least the {cpus} CPUs (the children compute: {busy:.0}% of a core across {workers}), then make the script faster")
        } else {
            format!("raise php-fpm's `pm.max_children`{now} in its pool as far as memory allows (each child holds one request at a time), or make the script faster")
        }
    } else if cpu_bound {
        format!("the upstream's workers compute ({busy:.0}% of a core across {workers} on {cpus} CPUs): more of them will not help; make its requests cheaper, or add CPUs or upstream servers")
    } else {
        "add upstream capacity (more worker processes or servers), or make the upstream's requests faster".into()
    };
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture, with_log};
    use crate::run::QueueMax;

    /// No failures, but requests waited at the upstream's socket for most of the run:
    /// its workers set the pace (a sweep's knee). Waiting now and then is not that.
    #[test]
    fn a_persistent_upstream_backlog_without_failures() {
        let mut run = fixture("healthy-before");
        assert!(!fires(&run, "upstream-saturated"));
        let q = |queued| QueueMax {
            addr: "/run/php/php8.2-fpm.sock".into(),
            max_queue: 12,
            backlog: 511,
            samples_full: 0,
            samples_queued: queued,
            samples: 10,
        };
        let ev = run.evidence.as_mut().unwrap();
        ev.window.listen_queues.push(q(9));
        let found = crate::diagnose::diagnose(&run);
        let f = found.iter().find(|f| f.id == "upstream-saturated").unwrap();
        assert!(f.title.contains("/run/php/php8.2-fpm.sock"), "{}", f.title);
        assert!(f.confidence <= 0.8);
        let ev = run.evidence.as_mut().unwrap();
        ev.window.listen_queues.pop();
        ev.window.listen_queues.push(q(2));
        assert!(!fires(&run, "upstream-saturated"));
    }

    #[test]
    fn php_fpm_saying_max_children_names_its_setting() {
        let mut run = fixture("php-fpm-children-before");
        with_log(
            &mut run,
            "max-children-reached",
            1,
            "lab-php-fpm-error.log",
            "max_children",
        );
        let found = crate::diagnose::diagnose(&run);
        let f = found.iter().find(|f| f.id == "upstream-saturated").unwrap();
        assert!(f.fix.contains("`pm.max_children` (now 5)"), "{}", f.fix);
        assert!(f.confidence >= 0.9);
        assert!(f.explanation.contains("server reached pm.max_children"));
    }
}
