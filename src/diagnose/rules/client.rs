//! The load generator itself as the limit.

use super::{competitors, fact, finding, ramp, Ctx, FindingId};
use crate::run::{ClientQuota, Finding, Kind};

/// Time throttled by a cgroup quota per second of load beyond which the client set the
/// pace (the same bar as the run-queue delay: 30% of the run).
const THROTTLED_MS_PER_S: f64 = 300.0;

/// Whether the client's CPU quota ran out in ≥ 30% of the periods and stopped it ≥ 30%
/// of a load of `duration_s`: it then set the pace, and its own stops are in the
/// latencies it measured.
fn held_back(q: &ClientQuota, duration_s: f64) -> bool {
    q.throttled_pct() >= 30.0 && q.throttled_ms / duration_s >= THROTTLED_MS_PER_S
}

/// The run's load generator was held back by its own cgroup's CPU quota.
pub(super) fn client_throttled(c: &Ctx) -> bool {
    c.run
        .client
        .quota
        .as_ref()
        .is_some_and(|q| held_back(q, c.duration_s()))
}

/// The load generator set the pace: its workers were busy ≥ 90% of the run, spent ≥ 30%
/// of it waiting for a CPU (schedstat run delay), or its cgroup's CPU quota ran out in
/// ≥ 30% of the periods and stopped it ≥ 30% of the run.
pub(super) fn client_saturated(c: &Ctx) -> Option<Finding> {
    // A merged Run is judged by its busiest client machine: one saturated segment
    // makes the whole total a floor, however idle the others were.
    let (cl, duration_s, who) = match &c.run.merged {
        Some(m) => match m
            .segments
            .iter()
            .max_by(|a, b| a.client.busy_pct_mean.total_cmp(&b.client.busy_pct_mean))
        {
            Some(p) => (
                &p.client,
                p.duration_s.max(1e-9),
                format!(" (segment {}/{} on {})", p.index, m.count, p.host),
            ),
            None => (&c.run.client, c.duration_s(), String::new()),
        },
        None => (&c.run.client, c.duration_s(), String::new()),
    };
    let threads = cl.threads.len().max(1) as f64;
    let delay_ms_s = cl
        .threads
        .iter()
        .filter_map(|t| t.run_delay_ms)
        .sum::<f64>()
        / threads
        / duration_s;
    let busy = cl.busy_pct_mean;
    let starved = delay_ms_s >= 300.0;
    // A CPU quota (a container's limit) stops the client's threads for the rest of
    // each period once it is spent: the threads neither look busy nor wait in a run
    // queue the scheduler counts, so the quota's own counters are the evidence.
    let throttled = cl.quota.as_ref().filter(|q| held_back(q, duration_s));
    if busy < 90.0 && !starved && throttled.is_none() {
        return None;
    }
    let others = competitors(c, None);
    // Starved by the server itself (client and server on the same CPUs) is a caveat of
    // the set-up, not something another process did; a quota is the client's own limit.
    let kind = if busy >= 90.0 || throttled.is_some() || !others.is_empty() {
        Kind::Bottleneck
    } else {
        Kind::Warning
    };
    let mut conf = ramp(busy, 90.0, 100.0).max(ramp(delay_ms_s, 300.0, 600.0));
    if let Some(q) = throttled {
        conf = conf.max(ramp(q.throttled_pct(), 30.0, 80.0));
    }
    let state = match throttled {
        Some(q) => format!("held back by its cgroup's CPU quota ({:.2} cores)", q.cores),
        None if busy >= 90.0 => "CPU-bound".into(),
        None => "starved of CPU".into(),
    };
    let mut f = finding(
        FindingId::ClientSaturated,
        kind,
        conf,
        format!("the load generator{who} was {state}: results are a floor"),
    );
    f.evidence = vec![
        fact("loadlens worker busy", busy, "%"),
        fact("loadlens worker run-queue delay", delay_ms_s, "ms/s"),
        fact("loadlens worker threads", threads, "threads"),
    ];
    if let Some(q) = throttled {
        f.evidence.extend([
            fact("loadlens cgroup CPU quota", q.cores, "cores"),
            fact("periods the quota ran out", q.throttled_pct(), "%"),
            fact("loadlens throttled", q.throttled_ms / duration_s, "ms/s"),
        ]);
    }
    f.explanation = format!(
        "loadlens's own worker threads {} so the request rate measured is what the client could drive, not what the server can serve.{}",
        match throttled {
            Some(_) => "were stopped by the CPU quota of the cgroup loadlens runs in (a container's CPU limit) for the rest of most scheduling periods,",
            None if busy >= 90.0 => "were busy nearly all the time,",
            None => "waited for a CPU a large part of the time,",
        },
        if others.is_empty() {
            if kind == Kind::Warning && c.shared_cpus().is_none_or(|s| !s.is_empty()) {
                " They competed with the server for the same CPUs.".to_string()
            } else {
                String::new()
            }
        } else {
            format!(" Competing for CPU: {}.", others.join(", "))
        }
    );
    f.fix = match throttled {
        Some(q) => format!(
            "raise or remove the CPU limit of the cgroup loadlens runs in (now {:.2} cores: cgroup `cpu.max` or `cpu.cfs_quota_us`; a container's `--cpus`, a Kubernetes `limits.cpu`), or run the client where it has whole cores",
            q.cores
        ),
        None => "give the client more CPU: more threads (-t), its own cores (taskset, away from the server and from busy processes), or another machine".into(),
    };
    Some(f)
}

/// Below this share of a core every watched server process had room to do more.
pub(super) const IDLE_PROC_PCT: f64 = 50.0;

/// The load's own concurrency set the rate: a closed loop of N requests in flight
/// completes N ÷ (mean latency) requests per second (Little's law), whatever the
/// server could do. With nothing saturated — the server's processes (busy or waiting
/// for a CPU), the client — the requests/s say how long one request takes, not how many the server
/// can serve.
pub(super) fn concurrency_bound(c: &Ctx) -> Option<Finding> {
    let run = c.run;
    let r = &run.results;
    // Open loop: the rate was asked for. Failing requests measure something else.
    if run.spec.open_loop() || r.responses == 0 {
        return None;
    }
    if r.errors.total() + r.non_2xx_3xx > r.responses / 100 {
        return None;
    }
    let e = c.ev?;
    let busiest = c.procs().iter().map(|p| p.cpu_pct).fold(0.0, f64::max);
    let cpus = &e.window.cpus;
    let idle = cpus.iter().map(|x| x.idle).sum::<f64>() / cpus.len().max(1) as f64;
    let client_busy = run.client.busy_pct_mean;
    // Nor waiting for a CPU (run-queue-delay's bar): other work on the machine may
    // keep its CPUs busy, as long as it did not hold the server back.
    let waited = c
        .procs()
        .iter()
        .filter_map(|p| p.run_delay_ms_per_s)
        .fold(0.0, f64::max);
    if c.procs().is_empty() || busiest >= IDLE_PROC_PCT || waited >= 100.0 || client_busy >= 50.0 {
        return None;
    }
    let in_flight = run.spec.connections as f64 * r.streams_per_connection.max(1) as f64;
    let mean_s = r.latency.mean_us / 1e6;
    if mean_s <= 0.0 {
        return None;
    }
    let littles = in_flight / mean_s;
    // Every connection busy all the time: the measured rate is what Little's law
    // allows (within 25%; connection set-up and the client's own turn make it lower).
    let ratio = r.requests_per_s / littles;
    if !(0.75..=1.1).contains(&ratio) {
        return None;
    }
    // A probe at more connections tests it: the rate must grow with them. Without
    // one it is a hypothesis (a pool of a few threads inside the server holds the rate
    // the same way), said as a warning.
    // A load whose requests already queued (its latency well above a probe's at one
    // connection) set its rate by its connections only if more of them bought rate in
    // proportion; a rate that grew a little while the added connections mostly waited
    // is a limit's (`pool-limit`).
    let more = super::pool::more_connections(run);
    let queued = crate::diagnose::path::unloaded(run)
        .is_some_and(|u| u.mean_ms > 0.0 && mean_s * 1e3 >= super::pool::QUEUED_FACTOR * u.mean_ms);
    if more
        .as_ref()
        .is_some_and(|m| m.grew < super::pool::GROWS || (queued && !m.elastic))
    {
        return None;
    }
    let grew = more.as_ref().map(|m| m.grew);
    let mut f = finding(
        FindingId::ConcurrencyBound,
        if grew.is_some() {
            Kind::Bottleneck
        } else {
            Kind::Warning
        },
        ramp(IDLE_PROC_PCT - busiest, 0.0, IDLE_PROC_PCT),
        format!(
            "the load's own concurrency set the rate: {in_flight:.0} requests in flight ÷ {:.1} ms each = {littles:.0}/s, nothing saturated",
            mean_s * 1e3
        ),
    );
    f.evidence = vec![
        fact(
            "requests in flight (connections × streams)",
            in_flight,
            "requests",
        ),
        fact("mean latency", mean_s * 1e3, "ms"),
        fact("in flight ÷ mean latency", littles, "/s"),
        fact("requests/s measured", r.requests_per_s, "/s"),
        fact("busiest server process CPU", busiest, "%"),
        fact("CPU idle (mean over CPUs)", idle, "%"),
        fact("loadlens worker busy", client_busy, "%"),
    ];
    f.explanation = format!(
        "In a closed loop each connection sends its next request only when the last is answered, so the rate is the requests in flight divided by the time each takes (Little's law). Nothing was saturated — the busiest server process used {busiest:.0}% of a core and waited {waited:.0} ms/s for a CPU, loadlens's workers were {client_busy:.0}% busy — so this rate is not the server's capacity: it is how long one request takes ({:.1} ms), repeated {in_flight:.0} at a time.",
        mean_s * 1e3
    );
    match (more.map(|m| m.probe), grew) {
        (Some(m), Some(g)) => {
            f.evidence.push(fact(
                &format!("probe at {} connections: requests/s", m.connections),
                m.requests_per_s,
                "/s",
            ));
            f.explanation.push_str(&format!(
                " A probe at {} connections served {:.0}/s, ×{g:.1}: the rate grows with the connections, so they, not a limit inside the server, set it.",
                m.connections, m.requests_per_s
            ));
        }
        _ => {
            f.title.push_str(" (not confirmed: no probe ran)");
            f.explanation.push_str(" No probe tested it (`--no-probe`, or a load that does not probe): a pool of a few threads or workers inside the server holds the rate the same way; run again without `--no-probe` (or with `--probe`) to tell them apart.");
        }
    }
    f.fix = format!(
        "load harder to find the capacity: more connections (-c, now {}), a fixed rate (-R) or `loadlens sweep -c {},{},{}`; if {:.1} ms per request is too slow, that latency (not throughput) is what to work on",
        run.spec.connections,
        run.spec.connections,
        run.spec.connections * 4,
        run.spec.connections * 16,
        mean_s * 1e3
    );
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};
    use crate::run::Kind;

    #[test]
    fn near_miss_client() {
        // Recorded in a cgroup of 0.1 cores: the quota ran out in most periods.
        let mut run = fixture("client-bound-before");
        assert_eq!(crate::diagnose::diagnose(&run)[0].id, "client-saturated");
        let secs = run.results.duration_s;
        for t in run.client.threads.iter_mut() {
            t.run_delay_ms = Some(0.2 * secs * 1000.0);
        }
        let q = run.client.quota.as_mut().unwrap();
        q.throttled_periods = q.periods / 4;
        assert!(!fires(&run, "client-saturated"));
        // Run delay alone, just past its bar: starved.
        run.client.quota = None;
        for t in run.client.threads.iter_mut() {
            t.run_delay_ms = Some(0.31 * secs * 1000.0);
        }
        assert!(fires(&run, "client-saturated"));
    }

    /// A client in a cgroup whose CPU quota ran out: not busy, no run-queue delay the
    /// scheduler counts, and still the limit. Below the bar (quota out in a fifth of
    /// the periods), nothing.
    #[test]
    fn near_miss_client_quota() {
        use crate::run::ClientQuota;
        let mut run = fixture("client-bound-after");
        assert!(!fires(&run, "client-saturated"));
        let secs = run.results.duration_s;
        let quota = |throttled_periods: u64, throttled_ms: f64| ClientQuota {
            cores: 0.25,
            periods: 100,
            throttled_periods,
            throttled_ms,
        };
        run.client.quota = Some(quota(20, 200.0 * secs));
        assert!(!fires(&run, "client-saturated"));
        run.client.quota = Some(quota(80, 100.0 * secs));
        assert!(!fires(&run, "client-saturated"));
        run.client.quota = Some(quota(80, 700.0 * secs));
        let found = crate::diagnose::diagnose(&run);
        let f = found.iter().find(|f| f.id == "client-saturated").unwrap();
        assert!(f.title.contains("CPU quota (0.25 cores)"), "{}", f.title);
        assert!(f.fix.contains("now 0.25 cores"), "{}", f.fix);
        // (nginx was at its CPU's limit in this Run too: the server's limit is the
        // bottleneck and the client's quota a caveat beside it.)
        assert_eq!(found[0].id, "server-cpu-saturated");
        assert_eq!(f.kind, crate::run::Kind::Warning);
    }

    /// Merged from two machines, one saturated: the pooled mean is below the bar, but
    /// the busiest segment's client names the finding.
    #[test]
    fn one_saturated_segment_of_a_merged_run() {
        use crate::run::{ClientCheck, Merged, SegmentPart};
        let mut run = fixture("client-bound-before");
        let busy = ClientCheck {
            busy_pct_mean: 97.0,
            saturated: true,
            ..run.client.clone()
        };
        let part = |index: u32, host: &str, client: ClientCheck| SegmentPart {
            index,
            host: host.into(),
            started_unix_s: 0.0,
            duration_s: run.results.duration_s,
            connections: 1,
            responses: 1,
            errors: 0,
            requests_per_s: 1.0,
            latency: run.results.latency.clone(),
            client,
        };
        let idle = ClientCheck {
            busy_pct_mean: 10.0,
            ..ClientCheck::default()
        };
        run.merged = Some(Merged {
            count: 2,
            segments: vec![part(1, "a", idle.clone()), part(2, "b", busy)],
            ..Merged::default()
        });
        run.client.busy_pct_mean = 50.0;
        for t in run.client.threads.iter_mut() {
            t.busy_pct = 50.0;
            t.run_delay_ms = None;
        }
        let f = crate::diagnose::diagnose(&run);
        let f = f
            .iter()
            .find(|f| f.id == "client-saturated")
            .expect("fires");
        assert!(f.title.contains("segment 2/2 on b"), "{}", f.title);
    }

    /// Recorded from the lab's few-connections (4 connections, a 50 ms PHP script): the
    /// load's concurrency is named. Each condition, broken, silences it.
    #[test]
    fn near_miss_concurrency_bound() {
        let run = fixture("few-connections-before");
        let found = crate::diagnose::diagnose(&run);
        assert_eq!(found[0].id, "concurrency-bound");
        assert!(found[0].fix.contains("-c, now 4"), "{}", found[0].fix);
        let mut open_loop = run.clone();
        open_loop.spec.rate = Some(80.0);
        assert!(!fires(&open_loop, "concurrency-bound"));
        let mut busy_server = run.clone();
        busy_server.evidence.as_mut().unwrap().window.processes[0].cpu_pct = 60.0;
        assert!(!fires(&busy_server, "concurrency-bound"));
        let mut waiting = run.clone();
        waiting.evidence.as_mut().unwrap().window.processes[0].run_delay_ms_per_s = Some(150.0);
        assert!(!fires(&waiting, "concurrency-bound"));
        let mut busy_client = run.clone();
        busy_client.client.busy_pct_mean = 60.0;
        assert!(!fires(&busy_client, "concurrency-bound"));
        // Half the rate Little's law allows: connections idle part of the time.
        let mut slower = run.clone();
        slower.results.requests_per_s /= 2.0;
        assert!(!fires(&slower, "concurrency-bound"));
        let mut failing = run.clone();
        failing.results.non_2xx_3xx = failing.results.responses / 50;
        assert!(!fires(&failing, "concurrency-bound"));
        // Another bottleneck held the requests (php-fpm's 16 children, found by the
        // probes as a pool of 16): the arithmetic stays, as info.
        let after = crate::diagnose::diagnose(&fixture("few-connections-after"));
        assert!(
            ["pool-limit", "upstream-saturated"].contains(&after[0].id.as_str()),
            "{}",
            after[0].id
        );
        assert!(after
            .iter()
            .all(|f| f.id != "concurrency-bound" || f.kind == Kind::Info));
    }
}
