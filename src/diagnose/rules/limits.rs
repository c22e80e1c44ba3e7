//! Configured limits: file descriptors and the server's own connection limit.

use super::{fact, finding, logged, ramp, Ctx, FindingId};
use crate::diagnose::kinds::Knob;
use crate::run::Counter;
use crate::run::{Finding, Kind};

pub(super) fn fd_limit(c: &Ctx) -> Option<Finding> {
    let own = ["EMFILE", "ENFILE"]
        .iter()
        .filter_map(|k| c.run.results.connect_errors.get(*k))
        .sum::<u64>();
    let near = c.fd_fill();
    // "accept4() failed (24: Too many open files)": the server said it, whatever the
    // samples caught between their ticks.
    let log = logged(c, "too-many-open-files");
    let (p, fill) = match near {
        Some((p, f)) if f >= 0.9 => (Some(p), f),
        Some((p, _)) if log.is_some() => (Some(p), 1.0),
        _ if own > 0 || log.is_some() => (None, 1.0),
        _ => return None,
    };
    let mut f = finding(
        FindingId::FdLimit,
        Kind::Bottleneck,
        ramp(fill, 0.9, 1.0),
        match p {
            Some(p) => format!("{} {} near its open-files limit", p.comm, p.pid),
            None if own == 0 => "the server ran out of open files".into(),
            None => "loadlens hit its open-files limit".into(),
        },
    );
    if let Some(p) = p {
        f.evidence.push(fact(
            "open fds (most during the run)",
            p.fds_peak().unwrap_or(0) as f64,
            "fds",
        ));
        f.evidence
            .push(fact("limit", p.fd_limit.unwrap_or(0) as f64, "fds"));
    }
    f.evidence
        .push(fact("loadlens EMFILE/ENFILE", own as f64, "connects"));
    f.explanation = "Every connection and every open file is a file descriptor; at the limit, accept() or connect() fails (EMFILE), connections wait in the accept queue or are dropped, and open() of a file to serve fails (500).".into();
    if let Some((_, fact, quote)) = log {
        f.evidence.push(fact);
        f.explanation.push_str(&quote);
    }
    f.fix = match (p, c.knob(Knob::OpenFiles)) {
        (None, _) if own > 0 => "raise loadlens's open-files limit: `ulimit -n`".into(),
        (_, Some(k)) => format!("raise the limit: {k}; `ulimit -n` for loadlens"),
        (_, None) => "raise the server's open-files limit (`LimitNOFILE=` in its unit, `ulimit -n` where it starts); `ulimit -n` for loadlens".into(),
    };
    Some(f)
}

/// The server at its own connection limit: nginx workers holding nearly
/// `worker_connections` connections (each an fd), or the server saying so in its error
/// log (nginx "worker_connections are not enough", Apache "server reached
/// MaxRequestWorkers"). Past it the server stops accepting; connections wait in the
/// accept queue or are dropped.
pub(super) fn connection_limit(c: &Ctx) -> Option<Finding> {
    let log = logged(c, "worker-connections-not-enough")
        .or_else(|| logged(c, "max-request-workers-reached"));
    let fill = c.worker_connections_fill();
    let waiting = waiting_to_be_accepted(c);
    let (w, fds, limit) = match (fill, &log) {
        (Some((w, fds, limit)), _) if fds as f64 >= 0.9 * limit as f64 || log.is_some() => {
            (Some(w), fds, Some(limit))
        }
        (None, Some(_)) => (None, 0, limit_from_log(c)),
        _ if waiting.is_some() => (None, 0, None),
        _ => return None,
    };
    let conf = match (limit, waiting) {
        _ if log.is_some() => 0.95,
        (Some(l), _) => ramp(fds as f64 / l.max(1) as f64, 0.9, 1.0),
        // Only the queue says it: a limit of some kind, not which.
        (None, Some(q)) => {
            ramp(q.samples_queued as f64 / q.samples.max(1) as f64, 0.5, 1.0).min(0.8)
        }
        (None, None) => 0.9,
    };
    let kind = c.front_kind();
    let name = crate::diagnose::kinds::setting(kind, Knob::Connections);
    let limit_text = match (name, limit) {
        (Some(n), Some(l)) => format!("its {n} ({l})"),
        (Some(n), None) => format!("its {n}"),
        (None, Some(l)) => format!("its connection limit ({l})"),
        (None, None) => "its connection limit".into(),
    };
    let mut f = finding(
        FindingId::ConnectionLimit,
        Kind::Bottleneck,
        conf,
        match w {
            Some(w) => format!("{} at {limit_text}", w.label()),
            None => format!("{} at {limit_text}", kind.name()),
        },
    );
    if w.is_some() {
        f.evidence.push(fact(
            "worker open fds (most during the run)",
            fds as f64,
            "fds",
        ));
    }
    if let Some(l) = limit {
        f.evidence.push(fact(
            name.unwrap_or("connection limit"),
            l as f64,
            "connections",
        ));
    }
    if let Some(q) = waiting {
        f.evidence.extend([
            fact("accept queue max", q.max_queue as f64, "connections"),
            fact(
                "samples with connections waiting to be accepted",
                (q.samples_queued as f64 / q.samples.max(1) as f64 * 100.0).round(),
                "%",
            ),
        ]);
    }
    f.explanation = "The server serves at most a configured number of connections (or requests in progress) at once; at the limit it stops accepting, and new connections wait in the accept queue or are dropped while its CPUs may idle.".into();
    if let Some((_, fact, quote)) = log {
        f.evidence.push(fact);
        f.explanation.push_str(&quote);
    }
    let configured = c.ev.is_some_and(|e| e.topology.config.is_some());
    f.fix = match (c.knob(Knob::Connections), limit) {
        (Some(k), _) if configured => {
            format!("raise {k} above the concurrent connections it must hold")
        }
        // The configuration was not read: the limit the log names stands for "now".
        (Some(k), Some(l)) => format!("raise {k} (now {l}) above the concurrent connections it must hold"),
        (Some(k), None) => format!("raise {k} above the concurrent connections it must hold"),
        (None, _) => "raise the server's connection (or worker) limit above the concurrent connections it must hold".into(),
    };
    Some(f)
}

/// The front's listen socket holding connections the server did not accept, in most
/// samples, while its workers had CPU to spare and the queue did not overflow (that is
/// listen-queue-overflow's finding): the server stopped accepting at a limit.
fn waiting_to_be_accepted<'a>(c: &Ctx<'a>) -> Option<&'a crate::run::QueueMax> {
    if c.counter(Counter::ListenOverflows) >= 10 {
        return None;
    }
    let port = c.run.target_addr.rsplit(':').next().unwrap_or("");
    let q = c
        .ev?
        .window
        .listen_queues
        .iter()
        .filter(|q| q.port_is_tcp() && q.addr.ends_with(&format!(":{port}")))
        .max_by_key(|q| q.max_queue)?;
    let busy = c
        .front_workers()
        .iter()
        .any(|p| c.worker_load_pct(p) >= 80.0);
    let queued = q.samples_queued * 2 >= q.samples.max(1) && q.max_queue >= 10;
    (queued && !busy).then_some(q)
}

/// The limit as the server's log line states it: "64 worker_connections are not
/// enough"; Apache's line names no number.
fn limit_from_log(c: &Ctx) -> Option<u64> {
    let said = c.log("worker-connections-not-enough")?.1;
    said.split(" worker_connections")
        .next()
        .and_then(|b| b.split_whitespace().last()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{assert_explained, fires, fixture, with_log};
    use crate::run::{Kind, Run};

    /// Regression (fresh-clone CI, lab apache_workers_low, 2 threads): whole 100 ms slices
    /// without a response while both threads were held, and `server-stalled` was ranked
    /// above the limit that held them.
    #[test]
    fn a_pool_at_its_limit_explains_the_slices_it_left_empty() {
        let mut run = fixture("apache-workers-16-before");
        // Without the lock waits this recording also has (worker-blocked would explain the
        // gaps): the threads held, not blocked.
        run.evidence.as_mut().unwrap().offcpu = None;
        let n = run.results.slices.len();
        for s in &mut run.results.slices[2..n / 2] {
            s.responses = 0;
            s.errors = 0;
        }
        let found = crate::diagnose::diagnose(&run);
        let ids: Vec<_> = found.iter().map(|f| (f.id.as_str(), f.kind)).collect();
        assert_eq!(found[0].id, "connection-limit", "{ids:?}");
        assert_explained(&found, "server-stalled", "connection-limit");
    }

    /// Apache at MaxRequestWorkers 16 with 100 connections (`lab run apache-workers
    /// --param threads=16`): its threads waited 38% of their time for the mmap lock. A
    /// pool's thread holds one request: the limit is the bottleneck and the block is
    /// beneath it, however much the threads blocked (CI's run: worker-blocked first).
    /// The same waits in an event loop's workers stand beside the limit.
    #[test]
    fn a_pools_blocked_threads_are_beneath_its_limit() {
        let run = fixture("apache-workers-16-before");
        for scale in [1.0, 2.0] {
            let mut run = run.clone();
            let off = run.evidence.as_mut().unwrap().offcpu.as_mut().unwrap();
            for p in &mut off.processes {
                if let Some(ms) = p.ms.get_mut(&crate::run::OffClass::Lock) {
                    *ms *= scale;
                }
            }
            let found = crate::diagnose::diagnose(&run);
            let ids: Vec<_> = found.iter().map(|f| (f.id.to_string(), f.kind)).collect();
            assert_eq!(found[0].id, "connection-limit", "×{scale}: {ids:?}");
            let blocked = found
                .iter()
                .find(|f| f.id == "worker-blocked")
                .expect("fires");
            assert_eq!(blocked.kind, Kind::Info, "×{scale}: {ids:?}");
            assert_eq!(blocked.because_of.as_deref(), Some("connection-limit"));
            assert!(blocked.explanation.contains("one request at a time"));
            assert!(blocked.fix.contains("`EnableMMAP Off`"), "{}", blocked.fix);
            // Apache closed kept-alive connections to make room at its limit (2.5
            // requests each; none closed after the fix): the limit's consequence.
            let closed = found
                .iter()
                .find(|f| f.id == "new-connection-cost")
                .expect("fires");
            assert_eq!(closed.kind, Kind::Info, "×{scale}: {ids:?}");
            assert_eq!(closed.because_of.as_deref(), Some("connection-limit"));
        }
        // A load that chose one request per connection: its cost is the load's own, not
        // the limit's consequence.
        let mut per_request = run.clone();
        per_request.spec.connreqs = Some(1);
        let found = crate::diagnose::diagnose(&per_request);
        let ids: Vec<_> = found.iter().map(|f| (f.id.to_string(), f.kind)).collect();
        let cost = found
            .iter()
            .find(|f| f.id == "new-connection-cost")
            .expect("fires");
        assert_ne!(
            cost.because_of.as_deref(),
            Some("connection-limit"),
            "{ids:?}"
        );
        // Event loops (HAProxy's threads, on the same processes) blocked as long: every
        // connection a worker holds waits, a limit of its own beside the other.
        let mut event_loop = run.clone();
        for p in &mut event_loop.evidence.as_mut().unwrap().topology.processes {
            if p.kind == crate::kinds::apache::KIND {
                p.kind = crate::kinds::haproxy::KIND;
            }
        }
        let found = crate::diagnose::diagnose(&event_loop);
        let ids: Vec<_> = found.iter().map(|f| (f.id.to_string(), f.kind)).collect();
        let blocked = found
            .iter()
            .find(|f| f.id == "worker-blocked")
            .expect("fires");
        assert_ne!(blocked.kind, Kind::Info, "{ids:?}");
    }

    #[test]
    fn fd_limit_and_worker_connections() {
        let mut run = fixture("healthy-before");
        let set_fds = |run: &mut Run, fds: u64| {
            for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
                p.fds = Some(fds);
                p.fd_limit = Some(1024);
            }
        };
        set_fds(&mut run, 1000);
        assert!(fires(&run, "fd-limit"));
        set_fds(&mut run, 800);
        assert!(!fires(&run, "fd-limit"));
        let mut cfg = crate::run::ServerConfig {
            kind: crate::kinds::nginx::KIND,
            ..Default::default()
        };
        cfg.directives
            .insert("worker_connections".into(), vec!["850".into()]);
        run.evidence.as_mut().unwrap().topology.config = Some(cfg);
        assert!(fires(&run, "connection-limit"));
        set_fds(&mut run, 700);
        assert!(!fires(&run, "connection-limit"));
    }

    /// The limit reached mid-run, the last sample quiet (the load had drained): judged
    /// on the most fds seen, the rules still fire.
    #[test]
    fn limits_are_judged_over_the_run_not_at_its_end() {
        let mut run = fixture("healthy-before");
        let mut cfg = crate::run::ServerConfig {
            kind: crate::kinds::nginx::KIND,
            ..Default::default()
        };
        cfg.directives
            .insert("worker_connections".into(), vec!["512".into()]);
        let ev = run.evidence.as_mut().unwrap();
        ev.topology.config = Some(cfg);
        for p in ev.window.processes.iter_mut() {
            p.fds = Some(12);
            p.fd_limit = Some(1024);
            p.fds_max = Some(1020);
        }
        assert!(fires(&run, "fd-limit"));
        assert!(fires(&run, "connection-limit"));
        for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
            p.fds_max = Some(100);
        }
        assert!(!fires(&run, "fd-limit"));
        assert!(!fires(&run, "connection-limit"));
    }

    /// The samples missed it (fds between ticks), the error log did not: the server's
    /// own word is enough, and a limit is not reported as an event-loop stall.
    #[test]
    fn the_error_log_names_the_limit_the_samples_missed() {
        let mut run = fixture("healthy-before");
        assert!(!fires(&run, "fd-limit"));
        with_log(
            &mut run,
            "too-many-open-files",
            40,
            "lab-nginx-error.log",
            "accept4()",
        );
        let found = crate::diagnose::diagnose(&run);
        let f = found.iter().find(|f| f.id == "fd-limit").expect("fd-limit");
        assert!(f
            .explanation
            .contains("accept4() failed (24: Too many open files)"));
        assert!(f
            .evidence
            .iter()
            .any(|e| e.unit == "lines" && e.value == 40.0));
        assert!(!found.iter().any(|f| f.id == "event-loop-stall"));

        let mut run = fixture("healthy-before");
        with_log(
            &mut run,
            "worker-connections-not-enough",
            3,
            "lab-nginx-error.log",
            "worker_connections are not enough",
        );
        let found = crate::diagnose::diagnose(&run);
        let f = found
            .iter()
            .find(|f| f.id == "connection-limit")
            .expect("connection-limit");
        // The limit is read from the message when the configuration was not.
        assert!(f.fix.contains("(now 64)"), "{}", f.fix);
    }

    /// Apache says it reached MaxRequestWorkers: the fix names Apache's directive with
    /// its value; the same Run from a server loadlens does not know (no kind, no
    /// config, no log) still gets the finding, from the queue that would not drain,
    /// with a generic fix.
    #[test]
    fn a_connection_limit_in_the_servers_own_words_or_generic() {
        use crate::run::ServerKind;
        let run = fixture("apache-workers-before");
        let found = crate::diagnose::diagnose(&run);
        let f = found.iter().find(|f| f.id == "connection-limit").unwrap();
        assert!(f.fix.contains("`MaxRequestWorkers 4`"), "{}", f.fix);
        assert!(
            f.title.starts_with("Apache at its MaxRequestWorkers"),
            "{}",
            f.title
        );

        let mut run = run;
        let ev = run.evidence.as_mut().unwrap();
        ev.logs.clear();
        ev.topology.config = None;
        ev.topology
            .processes
            .iter_mut()
            .for_each(|p| p.kind = ServerKind::UNKNOWN);
        ev.window
            .processes
            .iter_mut()
            .for_each(|p| p.kind = ServerKind::UNKNOWN);
        let found = crate::diagnose::diagnose(&run);
        let f = found
            .iter()
            .find(|f| f.id == "connection-limit")
            .expect("generic connection-limit");
        assert!(
            f.fix.starts_with("raise the server's connection"),
            "{}",
            f.fix
        );
        assert!(f
            .evidence
            .iter()
            .any(|e| e.name == "accept queue max" && e.value >= 50.0));
        assert!(f.confidence <= 0.8);

        // HAProxy's overflowing queue: its fix is HAProxy's, never nginx's.
        let found = crate::diagnose::diagnose(&fixture("haproxy-maxconn-before"));
        let f = found
            .iter()
            .find(|f| f.id == "listen-queue-overflow")
            .unwrap();
        assert!(
            f.fix.contains("`maxconn global: 20`") && !f.fix.contains("nginx"),
            "{}",
            f.fix
        );
    }
}
