//! The request path as a model: client → network → front server → each upstream, and
//! for each tier the requests in it, those waiting in front of it, its workers, its
//! utilisation and the time requests spend there — Little's law per tier (requests in
//! a tier = rate × time there), from evidence the Run already has: the load's own
//! numbers for the client, the connections' smoothed RTT (and the connect phase) for
//! the network, the established connections on an upstream's port (sock_diag, read
//! about once a second) for the requests in it, the accept queues for those waiting,
//! the workers' CPU for utilisation, and a 1-connection probe for the unloaded service
//! time. The front's time is what remains of the latency.
//!
//! The bottleneck is the tier requests wait in front of, or whose capacity is used up;
//! the rules say why (CPU, a pool of N, blocking…). The model is a pure function of the
//! Run, like the rules (Menascé & Almeida, *Capacity Planning for Web Services*, ch. 3:
//! Little's law and the utilisation law per resource).

use super::rules::Tier;
use super::{Ctx, FindingId};
use crate::run::{PathTier, Probe, ProcRates, RequestPath, Role};

/// A tier whose busiest resource is at or past this share is used up.
const USED_UP_PCT: f64 = 90.0;
/// Requests waiting in front of a tier, on average, for it to count as a queue: at
/// least one, and at least this share of those in it.
const QUEUE_SHARE: f64 = 0.25;

/// The tiers' names, as the report and the rules use them.
pub const CLIENT: &str = "client";
pub const NETWORK: &str = "network";
pub const FRONT: &str = "front";
pub const UPSTREAM: &str = "upstream";

/// The 1-connection probe of a Run, when one ran.
pub fn unloaded(run: &crate::run::Run) -> Option<&Probe> {
    run.probes
        .iter()
        .find(|p| p.connections == 1 && p.responses > 0)
}

/// The probe at the most connections, when it ran at more than the load.
pub fn loaded_more(run: &crate::run::Run) -> Option<&Probe> {
    run.probes
        .iter()
        .filter(|p| p.connections > run.spec.connections && p.responses > 0)
        .max_by_key(|p| p.connections)
}

/// The model of the Run's request path; `None` when nothing was watched or nothing
/// was answered.
pub(crate) fn model(c: &Ctx) -> Option<RequestPath> {
    let ev = c.ev?;
    let run = c.run;
    let r = &run.results;
    let rate = r.requests_per_s;
    let latency_ms = r.latency.mean_us / 1e3;
    if rate <= 0.0 || latency_ms <= 0.0 || c.procs().is_empty() {
        return None;
    }
    let share = |t: f64| (100.0 * t / latency_ms).clamp(0.0, 100.0);
    let mut tiers = Vec::new();

    // The client: in a closed loop each connection holds a request between a response
    // and the next request; that time is outside the latency.
    let n = (run.spec.connections * r.streams_per_connection.max(1)) as f64;
    let client_ms = if !run.spec.open_loop() {
        (n / rate * 1e3 - latency_ms).max(0.0)
    } else {
        0.0
    };
    tiers.push(PathTier {
        role: CLIENT.into(),
        name: "loadlens".into(),
        in_flight: rate * client_ms / 1e3,
        utilisation_pct: Some(run.client.busy_pct_mean),
        time_ms: client_ms,
        share_pct: 0.0,
        basis: "between a response and the next request (connections ÷ rate − latency), outside the latency".into(),
        ..PathTier::default()
    });

    // The network: a round trip per request, and the connect phase for each new
    // connection.
    let rtt_ms = ev
        .window
        .server_connections
        .as_ref()
        .map(|w| w.rtt_us as f64 / 1e3)
        .unwrap_or(0.0);
    let connect_ms = r.phases.as_ref().map_or(0.0, |p| {
        p.connect.mean_us / 1e3 * p.connect.count as f64 / r.responses.max(1) as f64
    });
    let net_ms = (rtt_ms + connect_ms).min(latency_ms);
    tiers.push(PathTier {
        role: NETWORK.into(),
        name: run.target_addr.clone(),
        in_flight: rate * net_ms / 1e3,
        time_ms: net_ms,
        share_pct: share(net_ms),
        basis: "the connections' smoothed RTT (sock_diag) and the connect phase per request".into(),
        ..PathTier::default()
    });

    // Each upstream: the requests in it from the connections on its port.
    let port = run.target_addr.rsplit(':').next().unwrap_or("");
    let upstream = upstream_tier(c, rate);
    let up_ms = upstream.as_ref().map_or(0.0, |u| u.time_ms);

    // The front: what remains of the latency.
    let front_ms = (latency_ms - net_ms - up_ms).max(0.0);
    let fronts = c.front_workers();
    let front_queue = mean_queue(c, |addr| addr.ends_with(&format!(":{port}")));
    tiers.push(PathTier {
        role: FRONT.into(),
        name: fronts
            .first()
            .map(|p| p.comm.clone())
            .unwrap_or_else(|| "the server".into()),
        in_flight: rate * front_ms / 1e3,
        waiting: front_queue,
        workers: (!fronts.is_empty()).then_some(fronts.len() as u32),
        workers_busy: None,
        utilisation_pct: utilisation(c, &fronts),
        time_ms: front_ms,
        share_pct: share(front_ms),
        basis: "the latency less the network's and the upstreams' time; waiting: its accept queue"
            .into(),
    });
    tiers.extend(upstream);
    for t in &mut tiers {
        if t.role == UPSTREAM {
            t.share_pct = share(t.time_ms);
        }
    }
    // With the unloaded service time, the slowest server tier's busy workers and the
    // requests waiting for them (Little's law at 1 connection: the tier is busy S of
    // each request; at rate X, X × S of its servers are busy).
    if let Some(p) = unloaded(run) {
        if let Some(t) = tiers
            .iter_mut()
            .filter(|t| t.role == FRONT || t.role == UPSTREAM)
            .max_by(|a, b| a.time_ms.total_cmp(&b.time_ms))
        {
            let service_ms = (p.mean_ms - net_ms).max(0.0).min(t.time_ms);
            let busy = rate * service_ms / 1e3;
            t.workers_busy = Some(busy);
            t.waiting = t.waiting.max(t.in_flight - busy);
        }
    }
    let (bottleneck, why) = match choose(&tiers) {
        Some((t, why)) => (Some(t), why),
        None => (None, String::new()),
    };
    Some(RequestPath {
        tiers,
        bottleneck,
        why,
    })
}

/// The upstream tier (one, the front's upstreams together), when the front passes
/// requests on.
fn upstream_tier(c: &Ctx, rate: f64) -> Option<PathTier> {
    let ev = c.ev?;
    let ups = c.upstream_procs();
    let in_samples: Vec<u32> = c
        .run
        .evidence
        .iter()
        .flat_map(|e| &e.samples)
        .filter(|s| s.t_s > 0.0 && s.t_s <= c.duration_s() + 0.5)
        .filter_map(|s| s.upstream_connections)
        .collect();
    if ups.is_empty() && in_samples.is_empty() && !c.proxies() {
        return None;
    }
    let port = c.run.target_addr.rsplit(':').next().unwrap_or("");
    let front_port = format!(":{port}");
    let queue = mean_queue(c, |addr| !addr.ends_with(&front_port));
    let workers: Vec<&ProcRates> = ups
        .iter()
        .copied()
        .filter(|p| p.role == Role::Worker)
        .collect();
    let workers = if workers.is_empty() {
        ups.clone()
    } else {
        workers
    };
    // php-fpm's children each serve one request: their count is the pool. A process
    // of many threads (a JVM) has a pool the model cannot see without a probe.
    let pool = (workers.len() > 1).then_some(workers.len() as u32);
    let (in_flight, basis) = if !in_samples.is_empty() {
        (
            in_samples.iter().sum::<u32>() as f64 / in_samples.len() as f64,
            "connections established on its port (sock_diag, the mean over the load)",
        )
    } else {
        // Without its connections (a unix socket): its queue and its busy workers.
        let busy: f64 = workers
            .iter()
            .map(|p| (p.cpu_demand_pct() / 100.0).min(1.0))
            .sum();
        (
            queue + busy,
            "its accept queue and its workers' CPU (its connections were not counted)",
        )
    };
    let name = match (ups.first(), ev.topology.upstream_listeners.first()) {
        (Some(p), Some(l)) => format!("{} on {}", p.comm, l.addr),
        (Some(p), None) => p.comm.clone(),
        (None, Some(l)) => l.addr.clone(),
        (None, None) => "the upstream".into(),
    };
    let time_ms = in_flight / rate * 1e3;
    let waiting = match pool {
        Some(n) => queue.max(in_flight - n as f64),
        None => queue,
    };
    Some(PathTier {
        role: UPSTREAM.into(),
        name,
        in_flight,
        waiting: waiting.max(0.0),
        workers: pool,
        workers_busy: pool.map(|n| in_flight.min(n as f64)),
        utilisation_pct: utilisation(c, &workers),
        time_ms: time_ms.min(c.run.results.latency.mean_us / 1e3),
        share_pct: 0.0,
        basis: basis.into(),
    })
}

/// The mean accept queue over the load's samples of the listeners `which` picks.
fn mean_queue(c: &Ctx, which: impl Fn(&str) -> bool) -> f64 {
    let Some(e) = c.ev else { return 0.0 };
    let during: Vec<_> = e
        .samples
        .iter()
        .filter(|s| s.t_s > 0.0 && s.t_s <= c.duration_s() + 0.5)
        .collect();
    if during.is_empty() {
        return 0.0;
    }
    let total: u32 = during
        .iter()
        .flat_map(|s| &s.listen_queues)
        .filter(|q| which(&q.addr))
        .map(|q| q.queue)
        .sum();
    total as f64 / during.len() as f64
}

/// How used up a tier's workers are, percent: their CPU (run and waited for) over the
/// cores they can use, or one thread at a core's limit.
fn utilisation(c: &Ctx, workers: &[&ProcRates]) -> Option<f64> {
    if workers.is_empty() {
        return None;
    }
    let demand: f64 = workers.iter().map(|p| p.cpu_demand_pct()).sum();
    let cores: f64 = workers
        .iter()
        .map(|p| c.worker_cores(p))
        .sum::<f64>()
        .min(c.server_cpus() as f64)
        .max(1.0);
    let one_thread = workers
        .iter()
        .filter_map(|p| c.one_thread_bound(p))
        .fold(0.0, f64::max);
    Some((demand / cores).max(one_thread).min(100.0))
}

/// The bottleneck tier and why: the deepest server tier whose capacity is used up, else
/// the one with the most requests waiting in front of it (at least one, and a quarter
/// of those in it).
fn choose(tiers: &[PathTier]) -> Option<(String, String)> {
    let servers = || {
        tiers
            .iter()
            .rev()
            .filter(|t| t.role == FRONT || t.role == UPSTREAM)
    };
    if let Some(t) = servers().find(|t| t.utilisation_pct.is_some_and(|u| u >= USED_UP_PCT)) {
        return Some((
            t.role.clone(),
            format!(
                "{} ({}) used {:.0}% of what it can: requests spent {:.1} ms there, {:.0}% of their time{}",
                t.role,
                t.name,
                t.utilisation_pct.unwrap_or(0.0),
                t.time_ms,
                t.share_pct,
                queued(t)
            ),
        ));
    }
    let t = servers()
        .filter(|t| t.waiting >= 1.0 && t.waiting >= QUEUE_SHARE * t.in_flight)
        .max_by(|a, b| a.waiting.total_cmp(&b.waiting))?;
    Some((
        t.role.clone(),
        format!(
            "requests waited in front of the {} ({}): {:.1} of the {:.1} in it, {:.1} ms each, {:.0}% of their time",
            t.role, t.name, t.waiting, t.in_flight, t.time_ms, t.share_pct
        ),
    ))
}

fn queued(t: &PathTier) -> String {
    if t.waiting >= 1.0 {
        format!(", {:.1} waiting in front of it", t.waiting)
    } else {
        String::new()
    }
}

/// Whether a finding is about the tier `role` (its resource is in that tier).
pub fn finding_tier(f: &crate::run::Finding, upstream_addrs: &[String]) -> Option<&'static str> {
    let in_upstream = || {
        f.title.contains("upstream")
            || upstream_addrs
                .iter()
                .any(|a| !a.is_empty() && f.title.contains(a.as_str()))
    };
    let tier = FindingId::of(f).map_or(Tier::Front, |id| id.row().tier);
    Some(match tier {
        Tier::Client => CLIENT,
        Tier::Network => NETWORK,
        Tier::Upstream => UPSTREAM,
        Tier::UpstreamIfNamed if in_upstream() => UPSTREAM,
        Tier::UpstreamIfNamed | Tier::Front => FRONT,
    })
}

/// Whether any upstream process was watched (for tests and the report).
pub fn has_upstream(p: &RequestPath) -> bool {
    p.tiers.iter().any(|t| t.role == UPSTREAM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testutil::fixture;

    /// php-fpm's children on its unix socket behind nginx (recorded): the upstream is
    /// the tier requests wait in.
    #[test]
    fn php_fpm_children_wait_in_the_upstream() {
        let run = fixture("php-fpm-socket-before");
        let p = model(&Ctx::new(&run)).expect("a path");
        let up = p
            .tiers
            .iter()
            .find(|t| t.role == UPSTREAM)
            .expect("upstream");
        assert_eq!(p.bottleneck.as_deref(), Some(UPSTREAM), "{p:#?}");
        assert!(up.workers.is_some(), "{up:?}");
        let total: f64 = p.tiers.iter().map(|t| t.share_pct).sum();
        assert!((90.0..=101.0).contains(&total), "{total}: {p:#?}");
    }

    /// nginx alone at its CPU's limit (recorded): the front is used up.
    #[test]
    fn healthy_nginx_is_the_front() {
        let run = fixture("healthy-before");
        let p = model(&Ctx::new(&run)).expect("a path");
        assert!(!has_upstream(&p), "{p:#?}");
        assert_eq!(p.bottleneck.as_deref(), Some(FRONT), "{p:#?}");
    }

    /// A few connections on a slow script with children to spare: no tier is used up
    /// and nothing waits, so the path names no bottleneck.
    #[test]
    fn few_connections_have_no_bottleneck_tier() {
        let run = fixture("few-connections-before");
        let p = model(&Ctx::new(&run)).expect("a path");
        assert_eq!(p.bottleneck, None, "{p:#?}");
    }
}
