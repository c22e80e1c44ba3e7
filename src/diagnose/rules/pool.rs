//! A concurrency limit inside a tier — a pool of threads, workers or connections that
//! no saturated resource explains — sized by Little's law from a probe.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::diagnose::kinds::{self, Knob};
use crate::diagnose::path;
use crate::run::{Finding, Kind, ServerKind};

/// The loaded latency must be at least this many times the unloaded one: requests
/// waited for the pool at least a third of their time.
pub(super) const QUEUED_FACTOR: f64 = 1.5;
/// The rate at more connections, as a share of the load's, below which the rate did
/// not grow with the connections (a probe of a few seconds varies by ~10%).
pub(super) const GROWS: f64 = 1.25;
/// A closed loop's rate is its connections over their latency: a probe at k × the
/// connections whose rate grew by k^ELASTIC or more took most of them as throughput
/// (×4 the connections: ×2 the rate); below that most of them waited, their latency
/// rising instead — a limit held the rate (measured: a JVM pool of 4 threads, 40
/// connections on a busy host, 55/s; at 160 connections 71/s, ×1.3, the latency ×1.6).
pub(super) const ELASTIC: f64 = 0.5;
/// Past this a tier's resource is saturated: a limit of its own explains the rate.
const SATURATED_PCT: f64 = 90.0;
/// The smallest pool named: `rate × unloaded time` below it is a single server's story.
const MIN_POOL: f64 = 1.5;
/// A worker running or waiting to run this share of its cores' time, while it waited
/// for a CPU, is not idle between requests waiting for a slot: a CPU holds it.
const CPU_HELD_PCT: f64 = 75.0;
/// The share of a request's unloaded time its tier spent on a CPU above which the
/// service time is CPU work: with the workers waiting for CPUs, `rate × unloaded time`
/// counts the CPUs they share, not a pool.
const CPU_SERVICE_SHARE: f64 = 0.25;

/// Requests waited for a fixed number of servers inside a tier: with nothing
/// saturated, the rate X stayed put when a probe added connections, and each request
/// took S unloaded (a probe at 1 connection) but W ≫ S under load. Then X × S servers
/// were busy all the time (Little's law applied to the servers alone), whatever the
/// connections: a pool of that size. The tier is the path's slowest server tier; its
/// size is matched to what the tier has (its workers) and the fix named in its words.
pub(super) fn pool_limit(c: &Ctx) -> Option<Finding> {
    let run = c.run;
    let r = &run.results;
    if run.spec.open_loop() || r.responses == 0 {
        return None;
    }
    if r.errors.total() + r.non_2xx_3xx > r.responses / 100 {
        return None;
    }
    let one = path::unloaded(run)?;
    let rate = r.requests_per_s;
    let latency_ms = r.latency.mean_us / 1e3;
    let service_ms = one.mean_ms;
    if service_ms <= 0.0 || latency_ms < QUEUED_FACTOR * service_ms {
        return None;
    }
    if more_connections(run).is_some_and(|m| m.elastic) {
        return None;
    }
    // A saturated resource explains a rate that stays put: that is its own finding.
    // (A process's share of its cores, not its busiest thread: a JVM's JIT compiler
    // thread busy after start is not what serves the requests.)
    let saturated = c
        .procs()
        .iter()
        .any(|p| c.worker_cpu_share(p) >= SATURATED_PCT);
    if saturated || run.client.busy_pct_mean >= 50.0 {
        return None;
    }
    let size = rate * service_ms / 1e3;
    // Fewer than two servers busy on the average is no pool: one request at a time is
    // a worker blocked or a stall, each a finding of its own.
    if size < MIN_POOL {
        return None;
    }
    let model = path::model(c)?;
    let tier = model
        .tiers
        .iter()
        .filter(|t| t.role == path::FRONT || t.role == path::UPSTREAM)
        .max_by(|a, b| a.time_ms.total_cmp(&b.time_ms))?;
    let procs = if tier.role == path::UPSTREAM {
        c.upstream_procs()
    } else {
        c.front_workers()
    };
    if cpu_held(c, &procs, rate, service_ms) {
        return None;
    }
    let kind = if tier.role == path::UPSTREAM {
        c.upstream_kind()
    } else {
        c.front_kind()
    };
    let rounded = size.round().max(1.0);
    let matched = tier
        .workers
        .filter(|&n| (n as f64 - size).abs() <= (0.25 * n as f64).max(1.0));
    let waited_ms = latency_ms - service_ms;
    let mut f = finding(
        FindingId::PoolLimit,
        Kind::Bottleneck,
        ramp(latency_ms / service_ms, QUEUED_FACTOR, 4.0),
        format!(
            "a concurrency limit of {rounded:.0} in the {} ({}): {rate:.0}/s × {service_ms:.1} ms unloaded; requests waited {waited_ms:.0} ms for it",
            tier.role, tier.name
        ),
    );
    if let Some(n) = matched {
        f.title.push_str(&format!(", its {n} workers"));
    }
    f.evidence = vec![
        fact("requests/s", rate, "/s"),
        fact("mean latency", latency_ms, "ms"),
        fact("probe at 1 connection: mean latency", service_ms, "ms"),
        fact(
            "probe at 1 connection: requests/s",
            one.requests_per_s,
            "/s",
        ),
        fact("limit (requests/s × unloaded latency)", size, "requests"),
        fact("connections", run.spec.connections as f64, "connections"),
        fact(
            &format!("requests in the {}", tier.role),
            tier.in_flight,
            "requests",
        ),
    ];
    let more = path::loaded_more(run);
    if let Some(m) = more {
        f.evidence.push(fact(
            &format!("probe at {} connections: requests/s", m.connections),
            m.requests_per_s,
            "/s",
        ));
    }
    let probe_said = match more {
        Some(m) => format!(
            " A probe at {} connections (×{:.0}) served {:.0}/s ({:+.0}%): the rate did not grow with the connections (the added ones waited), so the load's concurrency is not what set it.",
            m.connections,
            m.connections as f64 / run.spec.connections.max(1) as f64,
            m.requests_per_s,
            100.0 * (m.requests_per_s / rate - 1.0)
        ),
        None => String::new(),
    };
    f.explanation = format!(
        "A probe at 1 connection took {service_ms:.1} ms per request; under {} connections requests took {latency_ms:.1} ms, {waited_ms:.0} ms of it waiting. At {rate:.0}/s, {rate:.0} × {:.3} s = {size:.1} requests were being served at any moment (Little's law), whatever the connections: the {} ({}) serves at most about {rounded:.0} at once, and every other request waits for one of them. No resource was saturated (no process at its CPU's limit, loadlens not busy): the limit is a count, not a capacity.{probe_said}",
        run.spec.connections,
        service_ms / 1e3,
        tier.role,
        tier.name
    );
    let phrase = kinds::knob(kind, Knob::Pool).or_else(|| kinds::knob(kind, Knob::Workers));
    // The knob's value now, where the tier's configuration was read.
    let config = c.ev.and_then(|e| {
        if tier.role == path::UPSTREAM {
            e.topology.upstream_config.as_ref()
        } else {
            e.topology.config.as_ref()
        }
    });
    let now = kinds::setting(kind, Knob::Pool)
        .or_else(|| kinds::setting(kind, Knob::Workers))
        .and_then(|d| Some((d, config?.get(d)?)))
        .map(|(d, v)| format!(" (now `{d} {v}`)"))
        .unwrap_or_default();
    let pool = match (phrase, kind) {
        (Some(p), _) => format!("{p}{now}"),
        (None, ServerKind::UNKNOWN) => {
            "its pool of threads, workers or connections (the thread pool's size, the workers' count, a connection pool's maximum)".into()
        }
        (None, k) => format!("{}'s pool of threads or workers", k.name()),
    };
    f.fix = format!(
        "raise {pool} above {rounded:.0} (each added one serves ~{:.0}/s more, while the CPUs have room), or make each request shorter than {service_ms:.1} ms; more connections would only lengthen the wait",
        1e3 / service_ms
    );
    Some(f)
}

/// The tier's servers were held by CPUs they shared, not by their count: they waited
/// for a CPU (run-queue delay) and either ran or waited to run most of the time, or
/// their CPU time per request is a large part of its unloaded time. (nginx's two
/// workers pinned to one CPU beside other work: 32,000/s × 0.06 ms = "2", each worker
/// running 39% and waiting 50% of the time.) A pool's servers sleep on something else
/// (a JVM thread waiting 80 ms for a backend spends 0.1 ms of CPU on it), so a busy
/// host does not hide a pool.
fn cpu_held(c: &Ctx, procs: &[&crate::run::ProcRates], rate: f64, service_ms: f64) -> bool {
    let waited = |p: &crate::run::ProcRates| {
        p.run_delay_ms_per_s.unwrap_or(0.0) >= super::cpu::RUN_DELAY_MS_PER_S
    };
    if procs
        .iter()
        .any(|p| waited(p) && c.worker_cpu_share(p) >= CPU_HELD_PCT)
    {
        return true;
    }
    let cpu_ms_per_request = procs.iter().map(|p| p.cpu_pct * 10.0).sum::<f64>() / rate.max(1e-9);
    procs.iter().any(|p| waited(p)) && cpu_ms_per_request >= CPU_SERVICE_SHARE * service_ms
}

/// How the rate answered the probe at more connections than the load's.
pub(super) struct MoreConnections<'a> {
    pub probe: &'a crate::run::Probe,
    /// Its rate over the load's.
    pub grew: f64,
    /// The rate grew with the connections: by [`GROWS`] at least, and by most of the
    /// connections' own growth ([`ELASTIC`]).
    pub elastic: bool,
}

/// The probe at more connections than the load's, against the load; `None` without
/// one (or without a rate to compare).
pub(super) fn more_connections(run: &crate::run::Run) -> Option<MoreConnections<'_>> {
    let probe = path::loaded_more(run)?;
    let rate = run.results.requests_per_s;
    if rate <= 0.0 {
        return None;
    }
    let grew = probe.requests_per_s / rate;
    let k = probe.connections as f64 / run.spec.connections.max(1) as f64;
    let elastic = grew >= GROWS && grew.ln() >= ELASTIC * k.ln();
    Some(MoreConnections {
        probe,
        grew,
        elastic,
    })
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};
    use crate::run::Probe;

    fn probe(connections: u32, rps: f64, mean_ms: f64) -> Probe {
        Probe {
            connections,
            duration_s: 1.0,
            responses: (rps as u64).max(1),
            requests_per_s: rps,
            mean_ms,
            p50_ms: mean_ms,
            ..Probe::default()
        }
    }

    /// Regression (tune's baseline of lab thread-pool on a busy host): 4 JVM threads of
    /// 50 ms, 40 connections at 55/s, 630 ms each; the probe at 160 connections served
    /// 71/s (×1.3) in 977 ms. The rate grew a little while most of the added connections
    /// waited: the pool, not `concurrency-bound` ("the rate grows with the connections")
    /// as the ×1.25 bar alone said. A load that did not queue (its latency that of one
    /// connection) with the same partial growth is the load's own concurrency still: its
    /// probe passed a limit the load was below.
    #[test]
    fn a_rate_that_grew_less_than_its_connections_is_a_pool() {
        let ids = |run: &crate::run::Run| -> Vec<(String, crate::run::Kind)> {
            crate::diagnose::diagnose(run)
                .into_iter()
                .map(|f| (f.id.to_string(), f.kind))
                .collect()
        };
        let mut run = fixture("thread-pool-before");
        let more = run
            .probes
            .iter()
            .find(|p| p.connections == 160)
            .unwrap()
            .clone();
        // The load at more than a quarter below the probe's rate: ×1.3.
        run.results.requests_per_s = more.requests_per_s / 1.3;
        let found = ids(&run);
        assert_eq!(found[0].0, "pool-limit", "{found:?}");
        assert!(
            !found.iter().any(|(id, _)| id == "concurrency-bound"),
            "{found:?}"
        );
        // ×4 the connections bought ×2 the rate (and the latency rose ×2): most of them
        // became throughput — no pool.
        run.results.requests_per_s = more.requests_per_s / 2.0;
        assert!(!fires(&run, "pool-limit"), "{:?}", ids(&run));
        // 4 connections that did not queue (51 ms against 52 ms alone); the probe at 16
        // grew ×1.6 only (past a limit the load was below): still the load's concurrency.
        let mut few = fixture("few-connections-before");
        let rate = few.results.requests_per_s;
        for p in few.probes.iter_mut().filter(|p| p.connections == 16) {
            p.requests_per_s = rate * 1.6;
        }
        let found = ids(&few);
        assert_eq!(found[0].0, "concurrency-bound", "{found:?}");
    }

    /// Regression (lab event_loop_stall on a quiet host, 1 run in 2 at stop 49): nginx's
    /// single worker stopped 150 ms every second held ~32,000/s whatever the
    /// connections, and with 0.1 ms unloaded Little's law counted "a concurrency limit
    /// of 3" — pool-limit first, the stall beneath it. The requests waited for the
    /// stops, not for a free server: a stall found as the bottleneck explains the pool.
    /// Without the stall's spikes the same probes are a pool.
    #[test]
    fn a_stalled_loop_is_not_a_pool() {
        use crate::run::Kind;
        let mut run = fixture("event-loop-stall-before");
        let rate = run.results.requests_per_s;
        run.probes = vec![probe(1, 10_000.0, 0.1), probe(80, rate, 2.0)];
        let found = crate::diagnose::diagnose(&run);
        let ids: Vec<_> = found.iter().map(|f| (f.id.to_string(), f.kind)).collect();
        assert_eq!(found[0].id, "event-loop-stall", "{ids:?}");
        let pool = found.iter().find(|f| f.id == "pool-limit").expect("fires");
        assert_eq!(pool.kind, Kind::Info, "{ids:?}");
        // The stops taken away (no request slower than 10 ms, no slice without a
        // response): the same probes are a pool, first.
        let mut steady = run.clone();
        let h = steady.results.latency.decode().unwrap();
        let mut kept = crate::diagnose::testutil::histogram();
        for v in h.iter_recorded().filter(|v| v.value_iterated_to() < 10_000) {
            kept.record_n(v.value_iterated_to(), v.count_at_value())
                .unwrap();
        }
        let corrected = steady.results.latency.corrected_for_coordinated_omission;
        steady.results.latency = crate::run::LatencySummary::from_histogram(&kept, corrected);
        steady.results.latency.mean_us = run.results.latency.mean_us;
        for s in &mut steady.results.timeline {
            s.max_us = s.max_us.min(10_000);
        }
        let typical = steady
            .results
            .slices
            .iter()
            .map(|s| s.responses)
            .max()
            .unwrap_or(1);
        for s in &mut steady.results.slices {
            s.responses = s.responses.max(typical / 2);
            s.max_us = s.max_us.min(10_000);
        }
        let found = crate::diagnose::diagnose(&steady);
        let ids: Vec<_> = found.iter().map(|f| (f.id.to_string(), f.kind)).collect();
        assert_eq!(found[0].id, "pool-limit", "{ids:?}");
        assert_eq!(found[0].kind, Kind::Bottleneck, "{ids:?}");
    }

    /// The few-connections recording (4 connections, a 50 ms script, php-fpm children
    /// to spare): probes that show the rate growing confirm concurrency-bound; probes
    /// that show it flat with a short unloaded time make it a pool of the size Little's
    /// law gives. The same evidence without probes claims neither.
    #[test]
    fn probes_decide_between_concurrency_and_a_pool() {
        // (Recorded with its probes: the rate grew ×3.7 at 16 connections.)
        let recorded = crate::diagnose::diagnose(&fixture("few-connections-before"));
        assert_eq!(recorded[0].id, "concurrency-bound");
        assert_eq!(recorded[0].kind, crate::run::Kind::Bottleneck);
        // The fix's run (64 connections on php-fpm's 16 children): a pool of 16.
        let after = crate::diagnose::diagnose(&fixture("few-connections-after"));
        let pool = after
            .iter()
            .find(|f| f.id == "pool-limit")
            .expect("pool-limit");
        assert!(
            pool.title.contains("limit of 16 ") && pool.title.contains("its 16 workers"),
            "{}",
            pool.title
        );
        let mut run = fixture("few-connections-before");
        run.probes.clear();
        let rate = run.results.requests_per_s;
        let latency_ms = run.results.latency.mean_us / 1e3;
        // Without probes: concurrency-bound is unconfirmed, no pool claimed.
        let found = crate::diagnose::diagnose(&run);
        assert_eq!(found[0].id, "concurrency-bound");
        assert_eq!(found[0].kind, crate::run::Kind::Warning, "{:?}", found[0]);
        assert!(!fires(&run, "pool-limit"));
        // Rate grows ×4 at 16 connections, unloaded as slow as loaded: confirmed.
        let mut grows = run.clone();
        grows.probes = vec![
            probe(1, rate / 4.0, latency_ms),
            probe(16, rate * 3.8, latency_ms),
        ];
        let found = crate::diagnose::diagnose(&grows);
        assert_eq!(found[0].id, "concurrency-bound");
        assert_eq!(found[0].kind, crate::run::Kind::Bottleneck);
        assert!(
            found[0].explanation.contains("16 connections"),
            "{}",
            found[0].explanation
        );
        assert!(!fires(&grows, "pool-limit"));
        // Flat at 16 connections, unloaded a quarter of the loaded time: a pool of
        // rate × unloaded time.
        // A "pool" of one (unloaded a quarter of the loaded time, 4 connections) is
        // a single server's story (a blocked worker, a stall): not named a pool.
        let mut single = run.clone();
        single.probes = vec![
            probe(1, 4e3 / latency_ms, latency_ms / 4.0),
            probe(16, rate * 1.05, latency_ms * 4.0),
        ];
        assert!(!fires(&single, "pool-limit"));
        for (unloaded_ms, size) in [(latency_ms / 2.0, 2.0), (latency_ms / 1.6, 2.5)] {
            let mut flat = run.clone();
            flat.probes = vec![
                probe(1, 1e3 / unloaded_ms, unloaded_ms),
                probe(16, rate * 1.05, latency_ms * 4.0),
            ];
            let found = crate::diagnose::diagnose(&flat);
            assert_eq!(
                found[0].id,
                "pool-limit",
                "{:?}",
                found.iter().map(|f| &f.id).collect::<Vec<_>>()
            );
            let want = (rate * unloaded_ms / 1e3).round();
            assert!(
                found[0].title.contains(&format!("limit of {want:.0} ")),
                "{} (≈{size})",
                found[0].title
            );
            assert!(found
                .iter()
                .all(|f| f.id != "concurrency-bound" || f.kind != crate::run::Kind::Bottleneck));
        }
        // Loaded barely above unloaded: no queue, no pool.
        let mut no_queue = run.clone();
        no_queue.probes = vec![
            probe(1, rate / 4.0, latency_ms * 0.9),
            probe(16, rate, latency_ms * 4.0),
        ];
        assert!(!fires(&no_queue, "pool-limit"));
    }

    /// The same pool of 16 php-fpm children on a busy host: children that wait for a
    /// CPU but sleep through most of a request are still a pool; children whose CPU is
    /// a quarter of a request's unloaded time and who wait for it are held by the CPUs.
    #[test]
    fn children_waiting_for_cpu_are_a_pool_only_while_a_request_is_not_cpu() {
        let busy = |cpu_pct: f64| {
            let mut run = fixture("few-connections-after");
            let ev = run.evidence.as_mut().unwrap();
            for p in ev.window.processes.iter_mut() {
                if p.tier == crate::run::Tier::Upstream && p.role == crate::run::Role::Worker {
                    p.run_delay_ms_per_s = Some(300.0);
                    p.cpu_pct = cpu_pct;
                }
            }
            run
        };
        // 16 × 0.3% of CPU over 310/s: 0.15 ms of a 52 ms request.
        assert!(fires(&busy(0.33), "pool-limit"));
        // 16 × 5%: 2.6 ms, 5% of it — a pool still.
        assert!(fires(&busy(5.0), "pool-limit"));
        // 16 × 30%: 15 ms, 30% of it, waiting for CPUs: not a count.
        assert!(!fires(&busy(30.0), "pool-limit"));
        // The same CPU with no wait for it: the CPUs had room, a pool.
        let mut idle_cpus = busy(30.0);
        for p in idle_cpus
            .evidence
            .as_mut()
            .unwrap()
            .window
            .processes
            .iter_mut()
        {
            p.run_delay_ms_per_s = Some(5.0);
        }
        assert!(fires(&idle_cpus, "pool-limit"));
    }
}
