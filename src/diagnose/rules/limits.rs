//! Configured limits: file descriptors and nginx's worker_connections.

use super::{fact, finding, logged, ramp, Ctx};
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
        "fd-limit",
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
    f.fix = "raise the limit: `worker_rlimit_nofile 65535;` for nginx (and `LimitNOFILE=` in its unit), `ulimit -n` for loadlens".into();
    Some(f)
}

/// nginx workers holding nearly `worker_connections` connections (each one an fd).
pub(super) fn worker_connections_exhausted(c: &Ctx) -> Option<Finding> {
    // "64 worker_connections are not enough, reusing connections"
    let log = logged(c, "worker-connections-not-enough");
    let fill = c.worker_connections_fill();
    let (w, fds, limit) = match (fill, &log) {
        (Some((w, fds, limit)), _) if fds as f64 >= 0.9 * limit as f64 || log.is_some() => {
            (Some(w), fds, limit)
        }
        (None, Some(_)) => {
            let said = c.log("worker-connections-not-enough").map(|l| l.1)?;
            // "64 worker_connections are not enough": the number before the name.
            let limit = said
                .split(" worker_connections")
                .next()
                .and_then(|b| b.split_whitespace().last()?.parse().ok())
                .unwrap_or(0);
            (None, 0, limit)
        }
        _ => return None,
    };
    let conf = if log.is_some() {
        0.95
    } else {
        ramp(fds as f64 / limit.max(1) as f64, 0.9, 1.0)
    };
    let mut f = finding(
        "worker-connections-exhausted",
        Kind::Bottleneck,
        conf,
        match w {
            Some(w) => format!("nginx worker {} at its worker_connections ({limit})", w.pid),
            None => format!("nginx workers at their worker_connections ({limit})"),
        },
    );
    if w.is_some() {
        f.evidence.push(fact(
            "worker open fds (most during the run)",
            fds as f64,
            "fds",
        ));
    }
    f.evidence
        .push(fact("worker_connections", limit as f64, "connections"));
    f.explanation = "Each worker handles at most worker_connections connections (client and upstream together); at the limit it stops accepting (error log: \"worker_connections are not enough\") and new connections wait in the accept queue or are dropped.".into();
    if let Some((_, fact, quote)) = log {
        f.evidence.push(fact);
        f.explanation.push_str(&quote);
    }
    let limit = if limit == 0 {
        "?".to_string()
    } else {
        limit.to_string()
    };
    f.fix = format!(
        "raise `worker_connections` (now {limit}) in the events block, with `worker_rlimit_nofile` at least as high"
    );
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture, with_log};
    use crate::run::Run;

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
        let mut cfg = crate::run::NginxConfig::default();
        cfg.directives
            .insert("worker_connections".into(), vec!["850".into()]);
        run.evidence.as_mut().unwrap().topology.nginx = Some(cfg);
        assert!(fires(&run, "worker-connections-exhausted"));
        set_fds(&mut run, 700);
        assert!(!fires(&run, "worker-connections-exhausted"));
    }

    /// The limit reached mid-run, the last sample quiet (the load had drained): judged
    /// on the most fds seen, the rules still fire.
    #[test]
    fn limits_are_judged_over_the_run_not_at_its_end() {
        let mut run = fixture("healthy-before");
        let mut cfg = crate::run::NginxConfig::default();
        cfg.directives
            .insert("worker_connections".into(), vec!["512".into()]);
        let ev = run.evidence.as_mut().unwrap();
        ev.topology.nginx = Some(cfg);
        for p in ev.window.processes.iter_mut() {
            p.fds = Some(12);
            p.fd_limit = Some(1024);
            p.fds_max = Some(1020);
        }
        assert!(fires(&run, "fd-limit"));
        assert!(fires(&run, "worker-connections-exhausted"));
        for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
            p.fds_max = Some(100);
        }
        assert!(!fires(&run, "fd-limit"));
        assert!(!fires(&run, "worker-connections-exhausted"));
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
            .find(|f| f.id == "worker-connections-exhausted")
            .expect("worker-connections-exhausted");
        // The limit is read from the message when the configuration was not.
        assert!(f.fix.contains("(now 64)"), "{}", f.fix);
    }
}
