//! Configured limits: file descriptors and nginx's worker_connections.

use super::{fact, finding, ramp, Ctx};
use crate::run::{Finding, Kind};

pub(super) fn fd_limit(c: &Ctx) -> Option<Finding> {
    let own = ["EMFILE", "ENFILE"]
        .iter()
        .filter_map(|k| c.run.results.connect_errors.get(*k))
        .sum::<u64>();
    let near = c.fd_fill();
    let (p, fill) = match near {
        Some((p, f)) if f >= 0.9 => (Some(p), f),
        _ if own > 0 => (None, 1.0),
        _ => return None,
    };
    let mut f = finding(
        "fd-limit",
        Kind::Bottleneck,
        ramp(fill, 0.9, 1.0),
        match p {
            Some(p) => format!("{} {} near its open-files limit", p.comm, p.pid),
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
    f.explanation = "Every connection is a file descriptor; at the limit, accept() or connect() fails (EMFILE) and connections are refused or dropped.".into();
    f.fix = "raise the limit: `worker_rlimit_nofile 65535;` for nginx (and `LimitNOFILE=` in its unit), `ulimit -n` for loadlens".into();
    Some(f)
}

/// nginx workers holding nearly `worker_connections` connections (each one an fd).
pub(super) fn worker_connections_exhausted(c: &Ctx) -> Option<Finding> {
    let (w, fds, limit) = c.worker_connections_fill()?;
    if (fds as f64) < 0.9 * limit as f64 {
        return None;
    }
    let mut f = finding(
        "worker-connections-exhausted",
        Kind::Bottleneck,
        ramp(fds as f64 / limit as f64, 0.9, 1.0),
        format!("nginx worker {} at its worker_connections ({limit})", w.pid),
    );
    f.evidence = vec![
        fact("worker open fds (most during the run)", fds as f64, "fds"),
        fact("worker_connections", limit as f64, "connections"),
    ];
    f.explanation = "Each worker handles at most worker_connections connections (client and upstream together); at the limit it stops accepting (error log: \"worker_connections are not enough\") and new connections wait in the accept queue or are dropped.".into();
    f.fix = format!(
        "raise `worker_connections` (now {limit}) in the events block, with `worker_rlimit_nofile` at least as high"
    );
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};
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
}
