//! The load generator itself as the limit.

use super::{competitors, fact, finding, ramp, Ctx};
use crate::run::{Finding, Kind};

/// Time throttled by a cgroup quota per second of load beyond which the client set the
/// pace (the same bar as the run-queue delay: 30% of the run).
const THROTTLED_MS_PER_S: f64 = 300.0;

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
    let throttled = cl
        .quota
        .as_ref()
        .filter(|q| q.throttled_pct() >= 30.0 && q.throttled_ms / duration_s >= THROTTLED_MS_PER_S);
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
        "client-saturated",
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

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};

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
}
