//! Diagnose: the evidence of one Run → a short ranked list of findings, each with the
//! numbers that prove it and the fix. Rules are small pure functions over a recorded
//! Run (`rules/`, one file per resource), so each is unit-tested on Run JSON recorded from
//! the lab, beside it.
//!
//! Ranking: bottlenecks first, by confidence; then warnings; then info. When a cause
//! (a full listen queue, a stall, a hog) is found, or most responses were errors,
//! "the server's CPU was saturated" is its consequence and is demoted to info. When the load generator itself set the pace
//! while the server had headroom, that comes first and every other finding says its
//! conclusions are limited; when the server was at a limit too, the server's limit is
//! the bottleneck and the client's saturation a warning beside it.

pub mod catalog;
mod ctx;
mod endpoints;
pub mod explain;
mod kinds;
pub mod path;
mod rules;

pub(crate) use ctx::Ctx;

use crate::run::{Fact, Finding, Kind, Run};

pub use explain::explain;
pub use rules::{FindingId, UnknownFinding};

/// The id of every finding a rule can make, in the order the rules run.
pub fn rule_ids() -> impl Iterator<Item = &'static str> {
    FindingId::ALL.iter().map(|id| id.as_str())
}

/// Where the requests' time went along their path (the model in [`path`]), with the
/// finding that explains its bottleneck tier; `None` when the server was not watched.
pub fn request_path(run: &Run) -> Option<crate::run::RequestPath> {
    path::model(&Ctx::new(run))
}

/// Findings for a Run, ranked.
pub fn diagnose(run: &Run) -> Vec<Finding> {
    let ctx = Ctx::new(run);
    let mut found: Vec<Finding> = rules::ROWS
        .iter()
        .filter_map(|row| {
            let f = (row.check)(&ctx)?;
            debug_assert!(f.id == row.id, "a rule makes the finding of its own id");
            Some(f)
        })
        .collect();
    explained(&mut found);
    // A tail no rule explains is a finding only alone: beside another bottleneck (a
    // blocked worker, a stopped upstream, loss) that bottleneck is where it came from,
    // and its own finding says the tail's numbers.
    let other = |f: &Finding| {
        f.kind == Kind::Bottleneck
            && f.id != FindingId::LatencyTail
            && f.id != FindingId::ConcurrencyBound
    };
    // Loss seen at all (even short of its own mode) is a cause the tail may have.
    if found
        .iter()
        .any(|f| other(f) || f.id == FindingId::Retransmits)
    {
        found.retain(|f| f.id != FindingId::LatencyTail);
    }
    // The load's concurrency set the rate only when nothing else did: any other
    // bottleneck is what held the requests, and the closed loop's arithmetic a fact.
    if found
        .iter()
        .any(|f| f.kind == Kind::Bottleneck && f.id != FindingId::ConcurrencyBound)
    {
        for f in found
            .iter_mut()
            .filter(|f| f.id == FindingId::ConcurrencyBound)
        {
            f.kind = Kind::Info;
            f.explanation.push_str(
                " A bottleneck above held the requests: this is the closed loop's arithmetic, not the cause.",
            );
        }
    }
    let bottleneck = |f: &Finding, pred: &dyn Fn(&str) -> bool| {
        f.kind == Kind::Bottleneck && pred(f.id.as_str())
    };
    let is_capacity = |id: &str| id.parse().is_ok_and(|id: FindingId| id.row().capacity);
    // A cause on the server's side (not its capacity, not the client).
    let server_cause = found.iter().any(|f| {
        bottleneck(f, &|id| {
            id != FindingId::ClientSaturated && !is_capacity(id)
        })
    });
    let server_full = found.iter().any(|f| bottleneck(f, &is_capacity));
    let client_bound = found
        .iter()
        .any(|f| bottleneck(f, &|id| id == FindingId::ClientSaturated));
    // The server's CPU being busy is the consequence of a cause found elsewhere.
    if server_cause {
        for f in found.iter_mut().filter(|f| bottleneck(f, &is_capacity)) {
            f.kind = Kind::Info;
        }
    }
    // Most responses were errors: the run measured the error path, and a busy CPU is
    // the cost of answering them, not the server's capacity (the errors come first).
    if found.iter().any(|f| f.id == FindingId::HttpErrors) {
        for f in found.iter_mut().filter(|f| bottleneck(f, &is_capacity)) {
            f.kind = Kind::Info;
            f.explanation
                .push_str(" Most responses were errors: this is the cost of answering them, not the server's capacity for real requests.");
        }
    }
    if client_bound && (server_cause || server_full) {
        // The server had no headroom either: its limit is the finding, the client's
        // saturation a caveat beside it (the numbers are a floor).
        let limit = found
            .iter()
            .find(|f| f.kind == Kind::Bottleneck && f.id != FindingId::ClientSaturated)
            .map(|f| f.id.to_string())
            .unwrap_or_default();
        for f in found
            .iter_mut()
            .filter(|f| f.id == FindingId::ClientSaturated)
        {
            f.kind = Kind::Warning;
            f.explanation.push_str(&format!(
                " The server was at a limit of its own too (see {limit} above), so that limit, not the client, is the finding; the rates are a floor.",
            ));
            f.because_of = Some(limit.clone()).filter(|l| !l.is_empty());
        }
    } else if client_bound {
        // The server had headroom: the client set the pace, and comes first.
        for f in found
            .iter_mut()
            .filter(|f| f.id != FindingId::ClientSaturated)
        {
            f.confidence *= 0.7;
            f.explanation
                .push_str(" (The load generator set the pace of this run: server-side conclusions are limited.)");
        }
    }
    rank(&mut found);
    one_bottleneck(&mut found, path::model(&ctx).as_ref(), run);
    rank(&mut found);
    endpoints::name_the_endpoint(&mut found, run);
    found
}

/// Why `f` follows from a limit in the tier behind it, when it does (its row's
/// `queue_consequence`): beside a bottleneck it is that bottleneck's consequence.
fn queue_consequence(f: &Finding) -> Option<&'static str> {
    FindingId::of(f).and_then(|id| id.row().queue_consequence)
}

/// [`queue_consequence`] of `f` when its cause is in the tier `cause_tier`. A finding
/// of the front's connections to the upstream (its row's tier the upstream's: ports
/// run out, connect()'s search past TIME_WAIT, the upstream's queue) follows from a
/// limit behind the front only: a cause in the front itself — a worker waiting for its
/// CPU, a stall — makes no connection per request and fills no upstream's queue (lab
/// ephemeral-ports at 300 ports beside a build: 98% of the responses 502s for lack of
/// ports, and `ephemeral-ports-exhausted` shown as a consequence of the worker's wait
/// for a CPU).
fn consequence_of(f: &Finding, cause_tier: Option<&str>) -> Option<&'static str> {
    let of_the_upstream_hop =
        FindingId::of(f).is_some_and(|id| id.row().tier == rules::Tier::Upstream);
    queue_consequence(f).filter(|_| !of_the_upstream_hop || cause_tier == Some(path::UPSTREAM))
}

/// At most one bottleneck per run: the path's bottleneck tier chooses it among the
/// bottlenecks found (else the first ranked); every other bottleneck becomes a
/// consequence of it ("because of …", info) when the model or the pairwise table makes
/// it one, and otherwise a warning beside it — two independent limits need each its
/// own proof, which one run's findings do not give.
fn one_bottleneck(found: &mut [Finding], model: Option<&crate::run::RequestPath>, run: &Run) {
    let ups: Vec<String> = run
        .evidence
        .iter()
        .flat_map(|e| e.topology.upstream_listeners.iter().map(|l| l.addr.clone()))
        .collect();
    let bottlenecks: Vec<usize> = (0..found.len())
        .filter(|&i| found[i].kind == Kind::Bottleneck)
        .collect();
    let Some(&first) = bottlenecks.first() else {
        return;
    };
    let tier = model.and_then(|m| m.bottleneck.as_deref());
    let main = tier
        .and_then(|t| {
            let in_tier = |i: &usize| path::finding_tier(&found[*i], &ups) == Some(t);
            let symptom = |i: &usize| queue_consequence(&found[*i]).is_some();
            // A cause in the tier before a symptom of it (its queue's overflow); the
            // upstream's queue before the overflow it makes.
            let queue = |i: &usize| found[*i].id == FindingId::UpstreamSaturated;
            (bottlenecks.iter().find(|i| in_tier(i) && !symptom(i)))
                .or_else(|| bottlenecks.iter().find(|i| in_tier(i) && queue(i)))
                .or_else(|| bottlenecks.iter().find(|i| in_tier(i)))
                .copied()
        })
        .unwrap_or(first);
    // A cause of latency alone (a wait for a CPU, a stall) leaves a limit on the rate of
    // the server's own standing, and that limit comes first: a server closing every
    // connection, a worker blocked writing its log, whatever else the host ran. Each
    // has evidence the other cannot produce (what the rules' tables did not explain is
    // still a bottleneck here), so both stay bottlenecks.
    let latency_only = |f: &Finding| FindingId::of(f).is_some_and(|id| id.row().latency_only);
    let main_tier = path::finding_tier(&found[main], &ups);
    let server_rate_limit = |f: &Finding| {
        FindingId::of(f).is_some_and(|id| {
            let row = id.row();
            !row.latency_only
                && row.tier != rules::Tier::Client
                && consequence_of(f, main_tier).is_none()
        })
    };
    let rate_limit = latency_only(&found[main])
        .then(|| {
            bottlenecks
                .iter()
                .copied()
                .find(|&i| server_rate_limit(&found[i]))
        })
        .flatten();
    let (main, was_first) = match rate_limit {
        Some(rate) => (rate, Some(main)),
        None => (main, None),
    };
    let cause = found[main].id.clone();
    let cause_tier = path::finding_tier(&found[main], &ups);
    if let Some(w) = was_first {
        let below = found[main].confidence * 0.99;
        let f = &mut found[w];
        f.confidence = f.confidence.min(below);
        f.explanation.push_str(&format!(
            " Beside {cause} (above), which sets the rate: this wait adds to the latency of the requests it catches."
        ));
    }
    // A queue in front of the bottleneck tier: the drops' retries (a warning of their
    // own) are its consequences too.
    let queued = model.is_some_and(|m| {
        m.tiers
            .iter()
            .any(|t| Some(t.role.as_str()) == m.bottleneck.as_deref() && t.waiting >= 1.0)
    });
    if queued && path::finding_tier(&found[main], &ups) == tier {
        for f in found.iter_mut().filter(|f| f.kind == Kind::Warning) {
            if let Some(why) = consequence_of(f, cause_tier) {
                f.kind = Kind::Info;
                f.explanation
                    .push_str(&format!(" Because of {cause} (above): {why}."));
                f.because_of = Some(cause.clone());
            }
        }
    }
    // A limit with evidence of its own the cause cannot produce (the `unless` of what
    // the cause's row explains: bodies ~40 ms after their heads, a worker seen blocked)
    // stands beside it.
    let explains = cause
        .parse()
        .map_or(&[][..], |id: FindingId| id.row().explains);
    let independent = |f: &Finding| {
        explains
            .iter()
            .any(|e| f.id == e.consequence && e.unless.is_some_and(|u| u(f)))
    };
    for i in bottlenecks.into_iter().filter(|&i| i != main) {
        let f = &mut found[i];
        if Some(i) == was_first || independent(f) {
            continue;
        }
        match consequence_of(f, cause_tier) {
            Some(why) => {
                f.kind = Kind::Info;
                f.explanation
                    .push_str(&format!(" Because of {cause} (above): {why}."));
                f.because_of = Some(cause.clone());
            }
            None => {
                f.kind = Kind::Warning;
                f.explanation.push_str(&format!(
                    " Beside {cause} (above), the bottleneck of this run; a second limit would need evidence of its own that {cause} cannot explain."
                ));
                f.because_of = Some(cause.clone());
            }
        }
    }
}

/// Demotes each consequence of a cause found as a bottleneck (the `explains` of the
/// cause's row) to info, saying which cause explains it. Each relation is judged on the
/// rules' own verdicts, before any demotion: a consequence is explained by every cause
/// the rules found a bottleneck, in the order the rules run.
fn explained(found: &mut [Finding]) {
    let causes: Vec<FindingId> = found
        .iter()
        .filter(|f| f.kind == Kind::Bottleneck)
        .filter_map(FindingId::of)
        .collect();
    for cause in rules::ROWS.iter().filter(|r| causes.contains(&r.id)) {
        for e in cause.explains {
            let explains = |f: &Finding| f.id == e.consequence && !e.unless.is_some_and(|u| u(f));
            for f in found.iter_mut().filter(|f| explains(f)) {
                f.kind = Kind::Info;
                f.explanation
                    .push_str(&format!(" Explained by {} (above): {}.", cause.id, e.why));
                f.because_of.get_or_insert_with(|| cause.id.to_string());
            }
        }
    }
}

/// Orders findings as the report shows them: a client that set the pace first, then
/// bottlenecks, warnings, info, each by confidence.
pub fn rank(found: &mut [Finding]) {
    found.sort_by(|a, b| {
        let client_first =
            |f: &Finding| !(f.id == FindingId::ClientSaturated && f.kind == Kind::Bottleneck);
        (client_first(a), a.kind)
            .cmp(&(client_first(b), b.kind))
            .then(b.confidence.total_cmp(&a.confidence))
    });
}

/// The findings of several repetitions of one load as one list: each id once, as
/// strongly as any repetition found it, with a note where the repetitions disagree.
pub fn combine(per_repetition: &[&[Finding]]) -> Vec<Finding> {
    let n = per_repetition.len();
    let mut best: Vec<(Finding, usize)> = Vec::new();
    for f in per_repetition.iter().flat_map(|fs| fs.iter()) {
        match best.iter_mut().find(|(b, _)| b.id == f.id) {
            Some((b, count)) => {
                *count += 1;
                if (f.kind, -f.confidence) < (b.kind, -b.confidence) {
                    *b = f.clone();
                }
            }
            None => best.push((f.clone(), 1)),
        }
    }
    let mut out: Vec<Finding> = best
        .into_iter()
        .map(|(mut f, count)| {
            if count < n {
                f.title = format!("{} (in {count} of {n} repetitions)", f.title);
            }
            f
        })
        .collect();
    rank(&mut out);
    out
}

/// Maps `x` from `lo` (confidence 0.5) to `hi` (0.95), clamped: how far past the
/// threshold the evidence is.
pub(crate) fn ramp(x: f64, lo: f64, hi: f64) -> f64 {
    if hi <= lo {
        return 0.95;
    }
    (0.5 + 0.45 * (x - lo) / (hi - lo)).clamp(0.5, 0.95)
}

pub(crate) fn fact(name: &str, value: f64, unit: &str) -> Fact {
    Fact {
        name: name.to_string(),
        value,
        unit: unit.to_string(),
    }
}

#[cfg(test)]
mod testutil;

#[cfg(test)]
mod tests {
    use super::testutil::{assert_explained, fixture, with_mode, with_stall};
    use super::*;

    /// `run` with its first sampled worker caught in disk wait (state D) once: a stall
    /// of the server's own.
    fn with_a_worker_in_disk_wait(run: &Run) -> Run {
        let mut blocked = run.clone();
        let samples = &mut blocked.evidence.as_mut().unwrap().samples;
        let worker = samples[1]
            .processes
            .iter_mut()
            .next()
            .expect("a worker sampled");
        worker.state = "D".into();
        blocked
    }

    fn kind_of(found: &[Finding], id: &str) -> Option<Kind> {
        found.iter().find(|f| f.id == id).map(|f| f.kind)
    }

    /// Regression (the time-wait lab scenario, 1 run in 2): the proxy's worker busy in
    /// connect()'s port search delayed every connection at once, `event-loop-stall`
    /// fired with a higher confidence and was ranked above its cause.
    #[test]
    fn time_wait_explains_the_stall_it_makes() {
        let mut run = fixture("time-wait-before");
        with_stall(&mut run, 400_000);
        let found = diagnose(&run);
        assert_eq!(found[0].id, "time-wait-connect-cost", "{:?}", ids(&found));
        assert_explained(&found, "event-loop-stall", "time-wait-connect-cost");
        // Without the cause the same evidence is a stall, first.
        let mut no_proxy = run.clone();
        no_proxy.evidence.as_mut().unwrap().window.time_wait_max = 10;
        let found = diagnose(&no_proxy);
        assert_eq!(found[0].id, "event-loop-stall", "{:?}", ids(&found));
    }

    /// Regression (CI, diagnose_servers: two workers pinned to one CPU on a busy host):
    /// workers waiting 559 ms/s for the CPU made 20 requests ≥ 50 ms at once, and
    /// `event-loop-stall` was ranked first with no worker ever seen blocked. A stall
    /// whose samples caught a worker stopped or in disk wait still stands.
    #[test]
    fn waiting_for_a_cpu_explains_a_stall_but_not_a_blocked_worker() {
        let mut run = fixture("cpu-contention-before");
        with_stall(&mut run, 400_000);
        let found = diagnose(&run);
        assert_eq!(kind_of(&found, "run-queue-delay"), Some(Kind::Bottleneck));
        assert_explained(&found, "event-loop-stall", "run-queue-delay");
        let found = diagnose(&with_a_worker_in_disk_wait(&run));
        assert_eq!(kind_of(&found, "event-loop-stall"), Some(Kind::Bottleneck));
    }

    /// Regression (tests/profile.rs beside other test binaries: a worker blocked 39% of
    /// its time writing its log into a lagging FIFO also waited 504 ms/s for a CPU):
    /// `run-queue-delay` made `worker-blocked` a warning beside it. A wait in I/O is no
    /// CPU's doing: both stand as limits, each with its own evidence, the one on the rate
    /// first. A lock's waiters, whose holder waited for a CPU, are the run queue's.
    #[test]
    fn waiting_for_a_cpu_explains_a_lock_wait_but_not_a_blocked_write() {
        let mut run = fixture("blocking-log-before");
        let busy = fixture("cpu-contention-before").evidence.unwrap().window;
        let ev = run.evidence.as_mut().unwrap();
        ev.window.other_processes = busy.other_processes;
        for w in ev
            .window
            .processes
            .iter_mut()
            .filter(|p| p.role == crate::run::Role::Worker)
        {
            w.run_delay_ms_per_s = Some(500.0);
            w.last_cpu = 1;
        }
        let found = diagnose(&run);
        // The blocking sets the rate and comes first; the wait for a CPU stands beside it.
        assert_eq!(found[0].id, "worker-blocked", "{:?}", ids(&found));
        assert_eq!(kind_of(&found, "run-queue-delay"), Some(Kind::Bottleneck));
        let text = serde_json::to_string(&run).unwrap();
        let locked: Run = serde_json::from_str(&text.replace("\"pipe\"", "\"lock\"")).unwrap();
        let found = diagnose(&locked);
        assert_eq!(found[0].id, "run-queue-delay", "{:?}", ids(&found));
        assert_explained(&found, "worker-blocked", "run-queue-delay");
    }

    /// Regression (fresh-clone CI, tests/upstream.rs: 12 connections over 2 php-fpm
    /// children computing a few ms each): the queue's wait made 66% of the requests
    /// 36-48 ms and `nagle-delayed-ack` was ranked above `upstream-saturated`. Bodies
    /// ~40 ms after their heads are Nagle's alone: then it stands.
    #[test]
    fn a_saturated_upstream_explains_a_40_ms_mode_unless_bodies_lag_their_heads() {
        let mut run = fixture("php-fpm-children-before");
        let n = 3 * run.results.latency.count;
        with_mode(&mut run.results.latency, 42_000, n);
        let found = diagnose(&run);
        assert_eq!(found[0].id, "upstream-saturated", "{:?}", ids(&found));
        assert_explained(&found, "nagle-delayed-ack", "upstream-saturated");
        // (This recording has no phases: another's, with the bodies' mode added.)
        let mut split = run.clone();
        let mut phases = fixture("blocking-log-before")
            .results
            .phases
            .expect("phases");
        let bodies = phases.body.count;
        with_mode(&mut phases.body, 41_000, 10 * bodies);
        split.results.phases = Some(phases);
        let found = diagnose(&split);
        assert_eq!(
            kind_of(&found, "nagle-delayed-ack"),
            Some(Kind::Bottleneck),
            "{:?}",
            ids(&found)
        );
    }

    /// Regression (fresh-clone CI, tests/udp.rs h3 load through a 4 KiB QUIC buffer):
    /// 32% of the datagrams dropped at Caddy's full buffer held 154 requests ≥ 112 ms at
    /// once (QUIC's probe timeout, then the retransmission), no worker ever blocked, and
    /// `event-loop-stall` was ranked above the drops that made it. A stall whose samples
    /// caught a worker stopped or in disk wait still stands.
    #[test]
    fn dropped_datagrams_explain_the_stall_their_recovery_makes() {
        let mut run = fixture("udp-receive-buffer-before");
        // (This recording's own tail reaches 0.67 s at a 20 ms median: a 1 s stall.)
        with_stall(&mut run, 1_000_000);
        let found = diagnose(&run);
        assert_eq!(found[0].id, "udp-receive-buffer-drops", "{:?}", ids(&found));
        assert_explained(&found, "event-loop-stall", "udp-receive-buffer-drops");
        let found = diagnose(&with_a_worker_in_disk_wait(&run));
        assert_eq!(kind_of(&found, "event-loop-stall"), Some(Kind::Bottleneck));
    }

    /// Regression (lab ephemeral-ports at 300 ports and time-wait at 6,000, beside a
    /// build on the worker's CPU): the worker's wait for a CPU was chosen the bottleneck
    /// and the proxy's connections to its upstream — 98% of the responses 502s for lack
    /// of a port; 5,940 TIME_WAIT sockets searched past — were shown as its
    /// consequences. A cause in the front makes no connection per request: the limit of
    /// the upstream hop sets the rate and comes first, the wait for a CPU beside it.
    #[test]
    fn a_wait_for_a_cpu_does_not_explain_the_upstream_hop() {
        for (name, want) in [
            ("ephemeral-ports-300-before", "ephemeral-ports-exhausted"),
            ("time-wait-6000-before", "time-wait-connect-cost"),
        ] {
            let found = diagnose(&fixture(name));
            assert_eq!(found[0].id, want, "{name}: {:?}", ids(&found));
            let wait = found.iter().find(|f| f.id == "run-queue-delay").unwrap();
            assert!(
                wait.kind == Kind::Bottleneck && wait.explanation.contains("Beside"),
                "{name}: {:?}",
                ids(&found)
            );
        }
    }

    /// Out of ports, the port search is part of running out: one finding first.
    #[test]
    fn exhausted_ports_explain_the_port_search() {
        let run = fixture("ephemeral-ports-before");
        let found = diagnose(&run);
        assert_eq!(
            found[0].id,
            "ephemeral-ports-exhausted",
            "{:?}",
            ids(&found)
        );
        if let Some(k) = kind_of(&found, "time-wait-connect-cost") {
            assert_eq!(k, Kind::Info);
        }
    }

    /// A mix where one endpoint is slow behind a saturated upstream: the bottleneck
    /// names it; with the endpoints alike, it names none.
    #[test]
    fn a_mix_names_the_endpoint_that_waits() {
        use crate::run::test_endpoint;
        let mut run = fixture("php-fpm-children-before");
        run.results.endpoints = vec![
            test_endpoint("GET /static", &[400; 900]),
            test_endpoint("GET /api", &[90_000; 100]),
        ];
        let found = diagnose(&run);
        assert_eq!(found[0].id, "upstream-saturated", "{:?}", ids(&found));
        assert!(found[0].title.contains("`GET /api`"), "{}", found[0].title);
        run.results.endpoints = vec![
            test_endpoint("GET /a", &[9_000; 500]),
            test_endpoint("GET /b", &[10_000; 500]),
        ];
        let found = diagnose(&run);
        assert!(!found[0].title.contains("`GET /"), "{}", found[0].title);
    }

    /// Two slow endpoints of a mix behind a saturated upstream: the bottleneck's title
    /// names both.
    #[test]
    fn a_mix_names_two_endpoints_that_wait() {
        use crate::run::test_endpoint;
        let mut run = fixture("php-fpm-children-before");
        run.results.endpoints = vec![
            test_endpoint("GET /static", &[400; 800]),
            test_endpoint("GET /api", &[90_000; 100]),
            test_endpoint("GET /search", &[80_000; 100]),
        ];
        let found = diagnose(&run);
        assert_eq!(found[0].id, "upstream-saturated", "{:?}", ids(&found));
        assert!(
            found[0].title.contains("`GET /api` and `GET /search`"),
            "{}",
            found[0].title
        );
    }

    /// Several bottlenecks of one cause: the single-threaded upstream's recording has
    /// its queue's overflow beside its saturation; one bottleneck stays, the overflow
    /// is its consequence.
    #[test]
    fn one_bottleneck_with_its_consequences_beneath() {
        let run = fixture("php-fpm-children-before");
        let found = diagnose(&run);
        let n = found.iter().filter(|f| f.kind == Kind::Bottleneck).count();
        assert!(n <= 1, "{:?}", ids(&found));
    }

    fn ids(found: &[Finding]) -> Vec<(&str, Kind)> {
        found.iter().map(|f| (f.id.as_str(), f.kind)).collect()
    }
}
