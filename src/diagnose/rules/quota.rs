//! A CPU quota: the server's processes in a cgroup whose CFS bandwidth ran out (a
//! container's CPU limit, systemd's `CPUQuota=`) — Documentation/scheduler/sched-bwc.rst.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::run::{Finding, Kind, Role};

/// A quota's throttling per second of window beyond which it set the server's pace
/// (a tenth of the time stopped), and the share of periods it must run out in.
const QUOTA_THROTTLED_MS_PER_S: f64 = 100.0;
const QUOTA_THROTTLED_PCT: f64 = 20.0;

/// The server's processes in a CPU cgroup whose quota ran out: stopped for the rest of
/// each period however idle the machine's CPUs, so the run measured the quota. (The
/// CFS bandwidth controller: Documentation/scheduler/sched-bwc.rst.)
pub(super) fn cpu_quota(c: &Ctx) -> Option<Finding> {
    let e = c.ev?;
    let dt = e.window.duration_s.max(1e-9);
    let q = e
        .window
        .cgroup_quotas
        .iter()
        .filter(|q| {
            q.throttled_pct() >= QUOTA_THROTTLED_PCT
                && q.throttled_ms / dt >= QUOTA_THROTTLED_MS_PER_S
        })
        .max_by(|a, b| a.throttled_ms.total_cmp(&b.throttled_ms))?;
    // Its processes (every watched process was looked up: masters and workers).
    let inside: Vec<_> = c
        .procs()
        .iter()
        .filter(|p| q.pids.contains(&p.pid))
        .collect();
    let used_cores: f64 = inside.iter().map(|p| p.cpu_pct).sum::<f64>() / 100.0;
    let workers = inside.iter().filter(|p| p.role == Role::Worker).count();
    let who = inside
        .iter()
        .find(|p| p.is_front())
        .or(inside.first())
        .map(|p| p.comm.clone())
        .unwrap_or_else(|| "the server".into());
    let rate = q.throttled_ms / dt;
    let mut f = finding(
        FindingId::CpuQuota,
        Kind::Bottleneck,
        ramp(q.throttled_pct(), QUOTA_THROTTLED_PCT, 80.0).max(ramp(
            rate,
            QUOTA_THROTTLED_MS_PER_S,
            500.0,
        )),
        format!(
            "{who} throttled by its cgroup's CPU quota ({:.2} cores): stopped in {:.0}% of periods",
            q.cores,
            q.throttled_pct()
        ),
    );
    f.evidence = vec![
        fact("cgroup CPU quota", q.cores, "cores"),
        fact("CPU used by its processes", used_cores, "cores"),
        fact("periods the quota ran out", q.throttled_pct(), "%"),
        fact("throttled", rate, "ms/s"),
        fact("workers in the cgroup", workers as f64, "workers"),
    ];
    f.explanation = format!(
        "The cgroup {} allows its processes {:.2} cores per 100 ms period (CFS bandwidth control: a container's CPU limit, systemd's CPUQuota=). Once they have used it, every one of them is stopped until the next period, whatever the machine's idle CPUs: the workers look busy or waiting for a CPU, but more workers or less work per request only share the same quota.",
        q.path, q.cores
    );
    let workers_fix = if workers > 1 && (workers as f64) > q.cores.ceil() {
        match c.front_kind() {
            crate::kinds::nginx::KIND => format!(
                "; with {workers} workers on {:.2} cores, `worker_processes {}` wastes less in switching",
                q.cores,
                q.cores.ceil().max(1.0)
            ),
            _ => format!(
                "; no more workers than the quota's cores ({:.0})",
                q.cores.ceil().max(1.0)
            ),
        }
    } else {
        String::new()
    };
    f.fix = format!(
        "raise or remove the CPU limit (now {:.2} cores: `cpu.max` or `cpu.cfs_quota_us` of {}; docker `--cpus`, Kubernetes `resources.limits.cpu`, systemd `CPUQuota=`){workers_fix}",
        q.cores, q.path
    );
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};
    use crate::run::Kind;

    /// A server in a cgroup of 0.3 cores, recorded from the lab: the quota is named
    /// first, with the limit to raise, and explains the run-queue delay it causes.
    /// Below either bar (a fifth of the periods, 100 ms/s), nothing.
    #[test]
    fn near_miss_cpu_quota() {
        let run = fixture("cpu-quota-before");
        let found = crate::diagnose::diagnose(&run);
        assert_eq!(
            found[0].id,
            "cpu-quota",
            "{:?}",
            found.iter().map(|f| &f.id).collect::<Vec<_>>()
        );
        assert!(found[0].fix.contains("now 0.30 cores"), "{}", found[0].fix);
        if let Some(r) = found.iter().find(|f| f.id == "run-queue-delay") {
            assert_eq!(r.kind, Kind::Info);
        }
        let dt = run.evidence.as_ref().unwrap().window.duration_s;
        let mut few = run.clone();
        let q = &mut few.evidence.as_mut().unwrap().window.cgroup_quotas[0];
        q.throttled_periods = q.periods / 5 - 1;
        assert!(!fires(&few, "cpu-quota"));
        let mut short = run.clone();
        short.evidence.as_mut().unwrap().window.cgroup_quotas[0].throttled_ms = 99.0 * dt;
        assert!(!fires(&short, "cpu-quota"));
        assert!(!fires(&fixture("cpu-quota-after"), "cpu-quota"));
    }
}
