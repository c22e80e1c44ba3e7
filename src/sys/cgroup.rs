//! loadlens's own CPU cgroup (v1 or v2): its quota and the time it was throttled, so a
//! client held back by a container's CPU limit is not mistaken for a slow server.

/// Where loadlens's CPU cgroup lives: (directory, is v2).
fn cgroup_cpu_dir() -> Option<(String, bool)> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // v1: a line whose controllers include `cpu`; v2: the `0::` line.
    for l in cg.lines() {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        if ctrls.split(',').any(|c| c == "cpu") {
            for base in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
                let d = format!("{base}{path}");
                if std::path::Path::new(&d).join("cpu.stat").exists() {
                    return Some((d, false));
                }
            }
        }
    }
    let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    for base in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let d = format!("{base}{path}");
        if std::path::Path::new(&d).join("cpu.stat").exists() {
            return Some((d, true));
        }
    }
    None
}

/// The cgroup's CPU quota, as the kernel writes it.
pub fn cgroup_cpu_max() -> Option<String> {
    let (d, v2) = cgroup_cpu_dir()?;
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

/// Cumulative time the cgroup was throttled, ns.
pub fn cgroup_throttled_ns() -> Option<u64> {
    let (d, v2) = cgroup_cpu_dir()?;
    let text = std::fs::read_to_string(format!("{d}/cpu.stat")).ok()?;
    let key = if v2 {
        "throttled_usec"
    } else {
        "throttled_time"
    };
    let v: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())?;
    Some(if v2 { v * 1000 } else { v })
}
