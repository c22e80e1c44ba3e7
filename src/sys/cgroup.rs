//! A process's CPU cgroup (v1 or v2): its quota and the time it was throttled, so a
//! client held back by a container's CPU limit is not mistaken for a slow server (and a
//! server held back by one is named as such).
//!
//! Sources: `/proc/PID/cgroup` (which cgroup), then in the cgroup's directory v2
//! `cpu.max` and `cpu.stat` (`nr_periods`, `nr_throttled`, `throttled_usec`), or v1
//! `cpu.cfs_quota_us`, `cpu.cfs_period_us` and `cpu.stat` (`throttled_time` in ns) —
//! Documentation/admin-guide/cgroup-v2.rst and scheduler/sched-bwc.rst.

/// Whose cgroup: loadlens's own or another process's.
#[derive(Debug, Clone, Copy)]
pub enum Proc {
    Me,
    Pid(i32),
}

impl Proc {
    fn cgroup_file(self) -> String {
        match self {
            Proc::Me => "/proc/self/cgroup".into(),
            Proc::Pid(p) => format!("/proc/{p}/cgroup"),
        }
    }
}

/// Where a process's CPU cgroup lives: (directory, is v2).
///
/// Looked for under /sys/fs/cgroup, then as the parent process or init sees it
/// (`/proc/PPID/root/sys/fs/cgroup`): `ip netns exec` mounts a fresh /sys for its
/// namespace, which hides the cgroup mounts from the program it runs, not from the
/// shell (or lab) that started it.
fn cgroup_cpu_dir(who: Proc) -> Option<(String, bool)> {
    let cg = std::fs::read_to_string(who.cgroup_file()).ok()?;
    // SAFETY: getppid has no arguments and cannot fail.
    let parent = format!("/proc/{}/root", unsafe { libc::getppid() });
    let found = |bases: &[&str], path: &str| {
        ["", parent.as_str(), "/proc/1/root"]
            .iter()
            .find_map(|root| {
                bases.iter().find_map(|base| {
                    let d = format!("{root}{base}{path}");
                    std::path::Path::new(&d)
                        .join("cpu.stat")
                        .exists()
                        .then_some(d)
                })
            })
    };
    // v1: a line whose controllers include `cpu`; v2: the `0::` line.
    for l in cg.lines() {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        if ctrls.split(',').any(|c| c == "cpu") {
            let v1 = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"];
            if let Some(d) = found(&v1, path) {
                return Some((d, false));
            }
        }
    }
    let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    found(&["/sys/fs/cgroup", "/sys/fs/cgroup/unified"], path).map(|d| (d, true))
}

/// loadlens's own cgroup's CPU quota, as the kernel writes it (v2 `cpu.max`, or v1
/// `quota period`).
pub fn cgroup_cpu_max() -> Option<String> {
    cpu_max(Proc::Me)
}

/// A process's cgroup CPU quota, as the kernel writes it.
pub fn cpu_max(who: Proc) -> Option<String> {
    let (d, v2) = cgroup_cpu_dir(who)?;
    cpu_max_in(&d, v2)
}

/// The CPU quota of the cgroup in directory `d`.
fn cpu_max_in(d: &str, v2: bool) -> Option<String> {
    if v2 {
        std::fs::read_to_string(format!("{d}/cpu.max"))
            .ok()
            .map(|s| s.trim().to_string())
    } else {
        let q = std::fs::read_to_string(format!("{d}/cpu.cfs_quota_us")).ok()?;
        let p = std::fs::read_to_string(format!("{d}/cpu.cfs_period_us")).ok()?;
        Some(format!("{} {}", q.trim(), p.trim()))
    }
}

/// The quota in cores from `cpu.max`'s text (`"20000 100000"` → 0.2); `None` when
/// unlimited (`max` in v2, `-1` in v1) or unreadable.
pub fn quota_cores(cpu_max: &str) -> Option<f64> {
    let mut f = cpu_max.split_whitespace();
    let quota: f64 = f.next()?.parse().ok()?;
    let period: f64 = f.next()?.parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// A cgroup's CPU bandwidth counters (`cpu.stat`): cumulative since the cgroup was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// Enforcement periods that have elapsed with runnable tasks (`nr_periods`).
    pub periods: u64,
    /// Periods in which the quota ran out (`nr_throttled`).
    pub throttled_periods: u64,
    /// Total time the cgroup's runqueues were throttled, ns (summed over CPUs).
    pub throttled_ns: u64,
}

impl CpuStat {
    /// Parses `cpu.stat`: v2 gives `throttled_usec`, v1 `throttled_time` in ns.
    pub fn parse(text: &str) -> Option<CpuStat> {
        let get = |key: &str| -> Option<u64> {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(char::is_whitespace)?;
                (k == key).then(|| v.trim().parse().ok())?
            })
        };
        let throttled_ns = match get("throttled_usec") {
            Some(us) => us.saturating_mul(1000),
            None => get("throttled_time")?,
        };
        Some(CpuStat {
            periods: get("nr_periods").unwrap_or(0),
            throttled_periods: get("nr_throttled").unwrap_or(0),
            throttled_ns,
        })
    }

    /// What happened between `earlier` and this reading.
    pub fn delta(&self, earlier: &CpuStat) -> CpuStat {
        CpuStat {
            periods: self.periods.saturating_sub(earlier.periods),
            throttled_periods: self
                .throttled_periods
                .saturating_sub(earlier.throttled_periods),
            throttled_ns: self.throttled_ns.saturating_sub(earlier.throttled_ns),
        }
    }
}

/// A process's cgroup's `cpu.stat`.
pub fn cpu_stat(who: Proc) -> Option<CpuStat> {
    let (d, _) = cgroup_cpu_dir(who)?;
    cpu_stat_in(&d)
}

/// The `cpu.stat` of the cgroup in directory `d`.
fn cpu_stat_in(d: &str) -> Option<CpuStat> {
    CpuStat::parse(&std::fs::read_to_string(format!("{d}/cpu.stat")).ok()?)
}

/// A CPU cgroup with a quota, read at one moment: its directory, quota in cores, its
/// counters, and which of the asked-about processes are in it.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaReading {
    pub dir: String,
    pub cores: f64,
    pub stat: CpuStat,
    pub pids: Vec<i32>,
}

/// A cgroup directory as the machine names it: without the `/proc/PID/root` it may
/// have been reached through.
fn host_path(dir: &str) -> &str {
    dir.strip_prefix("/proc/")
        .and_then(|r| r.split_once("/root/"))
        .filter(|(pid, _)| pid.bytes().all(|b| b.is_ascii_digit()))
        .map_or(dir, |(_, rest)| &dir[dir.len() - rest.len() - 1..])
}

/// The CPU cgroups with a quota that hold any of `pids` (each cgroup once; `dir` as
/// the machine names it).
pub fn quotas_of(pids: &[i32]) -> Vec<QuotaReading> {
    let mut out: Vec<QuotaReading> = Vec::new();
    for &pid in pids {
        // /proc/PID/cgroup is read once per process; the cgroup's files once each.
        let Some((dir, v2)) = cgroup_cpu_dir(Proc::Pid(pid)) else {
            continue;
        };
        if let Some(q) = out.iter_mut().find(|q| q.dir == host_path(&dir)) {
            q.pids.push(pid);
            continue;
        }
        let Some(cores) = cpu_max_in(&dir, v2).as_deref().and_then(quota_cores) else {
            continue;
        };
        let Some(stat) = cpu_stat_in(&dir) else {
            continue;
        };
        out.push(QuotaReading {
            dir: host_path(&dir).to_string(),
            cores,
            stat,
            pids: vec![pid],
        });
    }
    out
}

/// Cumulative time loadlens's own cgroup was throttled, ns.
pub fn cgroup_throttled_ns() -> Option<u64> {
    cpu_stat(Proc::Me).map(|s| s.throttled_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cgroup v1's cpu.stat (kernel 6.18, a group with `cpu.cfs_quota_us` 20000).
    const V1: &str = "nr_periods 31\nnr_throttled 27\nthrottled_time 2190345117\nnr_bursts 0\nburst_time 0\nwait_sum 0\n";
    /// cgroup v2's cpu.stat.
    const V2: &str = "usage_usec 5074522\nuser_usec 1622187\nsystem_usec 3452335\ncore_sched.force_idle_usec 0\nnr_periods 52\nnr_throttled 48\nthrottled_usec 4123456\nnr_bursts 0\nburst_usec 0\n";

    #[test]
    fn cpu_stat_v1_and_v2() {
        assert_eq!(
            CpuStat::parse(V1),
            Some(CpuStat {
                periods: 31,
                throttled_periods: 27,
                throttled_ns: 2_190_345_117
            })
        );
        assert_eq!(
            CpuStat::parse(V2),
            Some(CpuStat {
                periods: 52,
                throttled_periods: 48,
                throttled_ns: 4_123_456_000
            })
        );
        // No throttling counter at all (not a CPU controller's file).
        assert_eq!(CpuStat::parse("usage_usec 5\n"), None);
        let a = CpuStat::parse(V1).unwrap();
        let b = CpuStat {
            periods: 41,
            throttled_periods: 30,
            throttled_ns: 2_290_345_117,
        };
        assert_eq!(
            b.delta(&a),
            CpuStat {
                periods: 10,
                throttled_periods: 3,
                throttled_ns: 100_000_000
            }
        );
    }

    #[test]
    fn host_paths() {
        assert_eq!(
            host_path("/proc/5735/root/sys/fs/cgroup/cpu/x"),
            "/sys/fs/cgroup/cpu/x"
        );
        assert_eq!(host_path("/sys/fs/cgroup/cpu/x"), "/sys/fs/cgroup/cpu/x");
        assert_eq!(host_path("/proc/self/root/sys/x"), "/proc/self/root/sys/x");
    }

    #[test]
    fn quota_in_cores() {
        assert_eq!(quota_cores("20000 100000"), Some(0.2));
        assert_eq!(quota_cores("150000 100000"), Some(1.5));
        assert_eq!(quota_cores("max 100000"), None);
        assert_eq!(quota_cores("-1 100000"), None);
        assert_eq!(quota_cores(""), None);
    }
}
