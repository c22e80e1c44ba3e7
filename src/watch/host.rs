//! Facts read once before the load: kernel, CPUs, the sysctls that matter to a web
//! server, link speeds, the cgroup's CPU quota.

use std::collections::BTreeMap;

use crate::run::{HostFacts, Role, Tier};
use crate::sys::cgroup::cgroup_cpu_max;
use crate::sys::procfs::{parse_cpu_list, parse_cpus_allowed};

use super::snapshot::Reader;

/// Sysctls that matter to a web server under load, read once.
const SYSCTLS: &[&str] = &[
    "net/core/somaxconn",
    "net/core/netdev_max_backlog",
    "net/core/rmem_max",
    "net/core/rmem_default",
    "net/core/wmem_max",
    "net/core/wmem_default",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/tcp_max_syn_backlog",
    "net/ipv4/ip_local_port_range",
    "net/ipv4/tcp_tw_reuse",
    "net/ipv4/tcp_fin_timeout",
    "net/ipv4/tcp_max_tw_buckets",
    "net/ipv4/tcp_syncookies",
    "net/ipv4/tcp_congestion_control",
    "fs/file-max",
    "net/netfilter/nf_conntrack_max",
];

impl Reader {
    /// The CPUs the front server's workers may run on (the union of their affinity
    /// masks; every watched process when none is a worker: an idle master's mask says
    /// nothing about where the serving happens), empty when none could be read.
    fn server_cpus(&self) -> Vec<u32> {
        let front = self.procs.iter().filter(|p| p.tier != Tier::Upstream);
        let workers = front.clone().any(|p| p.role == Role::Worker);
        let mut cpus: Vec<u32> = front
            .filter(|p| !workers || p.role == Role::Worker)
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{}/status", p.pid)).ok())
            .filter_map(|t| parse_cpus_allowed(&t))
            .flatten()
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }

    pub(super) fn host_facts(&mut self) -> HostFacts {
        let sys = self.sys_root();
        let mut sysctls = BTreeMap::new();
        for name in SYSCTLS {
            let path = format!("{sys}/sys/{name}");
            if let Ok(v) = std::fs::read_to_string(&path) {
                sysctls.insert(
                    name.replace('/', "."),
                    v.split_ascii_whitespace().collect::<Vec<_>>().join(" "),
                );
            }
        }
        let affinity = loadgen_cpus();
        HostFacts {
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            cpus: online_cpus().max(affinity.len() as u32),
            loadgen_cpus: affinity,
            server_cpus: self.server_cpus(),
            sysctls,
            physical_ifaces: physical_ifaces(),
            link_speed_mbps: self.speeds.clone(),
            cgroup_cpu_max: cgroup_cpu_max(),
            qdisc_rate_bytes_per_s: BTreeMap::new(),
        }
    }
}

/// Interfaces with a device behind them (a NIC), not virtual ones.
fn physical_ifaces() -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .flatten()
        .filter(|e| e.path().join("device").exists())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// CPUs online on the machine, whatever loadlens's own affinity or cgroup (which
/// `available_parallelism` reflects: a client pinned to one CPU would record 1).
fn online_cpus() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|t| parse_cpu_list(&t).len() as u32)
        .ok()
        .filter(|&n| n > 0)
        // SAFETY: sysconf has no memory arguments.
        .unwrap_or_else(|| unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32)
}

/// CPUs this process may run on (sched_getaffinity).
fn loadgen_cpus() -> Vec<u32> {
    // SAFETY: sched_getaffinity fills the zeroed cpu_set_t we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect()
    }
}

pub(super) fn link_speeds() -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir("/sys/class/net") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            // Reading speed of a link without one fails with EINVAL, or gives -1.
            if let Some(s) = std::fs::read_to_string(e.path().join("speed"))
                .ok()
                .and_then(|t| t.trim().parse::<i64>().ok())
                .filter(|&s| s > 0)
            {
                out.insert(name, s as u64);
            }
        }
    }
    out
}
