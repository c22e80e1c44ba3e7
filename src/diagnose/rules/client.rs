//! The load generator itself as the limit.

use super::{competitors, fact, finding, ramp, Ctx};
use crate::run::{Finding, Kind};

/// The load generator set the pace: its workers were busy ≥ 90% of the run, or spent
/// ≥ 30% of it waiting for a CPU (schedstat run delay).
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
    if busy < 90.0 && !starved {
        return None;
    }
    let others = competitors(c, None);
    // Starved by the server itself (client and server on the same CPUs) is a caveat of
    // the set-up, not something another process did.
    let kind = if busy >= 90.0 || !others.is_empty() {
        Kind::Bottleneck
    } else {
        Kind::Warning
    };
    let conf = ramp(busy, 90.0, 100.0).max(ramp(delay_ms_s, 300.0, 600.0));
    let mut f = finding(
        "client-saturated",
        kind,
        conf,
        format!(
            "the load generator{who} was {}: results are a floor",
            if busy >= 90.0 {
                "CPU-bound"
            } else {
                "starved of CPU"
            }
        ),
    );
    f.evidence = vec![
        fact("loadlens worker busy", busy, "%"),
        fact("loadlens worker run-queue delay", delay_ms_s, "ms/s"),
        fact("loadlens worker threads", threads, "threads"),
    ];
    f.explanation = format!(
        "loadlens's own worker threads {} so the request rate measured is what the client could drive, not what the server can serve.{}",
        if busy >= 90.0 {
            "were busy nearly all the time,"
        } else {
            "waited for a CPU a large part of the time,"
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
    f.fix = "give the client more CPU: more threads (-t), its own cores (taskset, away from the server and from busy processes), or another machine".into();
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};

    #[test]
    fn near_miss_client() {
        let mut run = fixture("client-bound-before");
        for t in run.client.threads.iter_mut() {
            t.run_delay_ms = Some(0.2 * run.results.duration_s * 1000.0);
        }
        assert!(!fires(&run, "client-saturated"));
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
