//! Watch the machine during the run: a sampler thread reads cumulative counters and
//! gauges from /proc, /sys and netlink at a fixed interval, and a before/after snapshot
//! brackets exactly the load window, so a burst between two samples still shows in the
//! window deltas. Everything lands in [`Evidence`], part of the Run.
//!
//! Network counters are read from the server's network namespace (`/proc/PID/net/*` of
//! a server process shows that process's namespace) when the server is known, else from
//! loadlens's own. CPU counters are global. Missing sources degrade to one warning each.
//!
//! Memory: one [`Sample`] is a few KiB; at most [`MAX_SAMPLES`] are kept (1 h at
//! 100 ms, 10 h at 1 s), after which sampling continues only for the window deltas.

pub mod discover;
pub mod nginx;
pub mod procfs;
pub mod sockdiag;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::ThreadCpuSample;
use discover::{Hints, Topology};
use procfs::*;
use sockdiag::{Diag, Listener};

/// Samples kept in the Run; see the module doc.
pub const MAX_SAMPLES: usize = 36_000;

/// The counters that the sample series carries as per-second rates (the window deltas
/// carry every counter that moved).
const SERIES_COUNTERS: &[&str] = &[
    "Tcp.ActiveOpens",
    "Tcp.PassiveOpens",
    "Tcp.AttemptFails",
    "Tcp.EstabResets",
    "Tcp.RetransSegs",
    "Tcp.OutRsts",
    "Tcp.InErrs",
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.TCPReqQFullDrop",
    "TcpExt.SyncookiesSent",
    "TcpExt.TCPTimeouts",
    "TcpExt.TCPSynRetrans",
    "TcpExt.TW",
    "TcpExt.TCPTimeWaitOverflow",
    "TcpExt.TCPAbortOnData",
    "TcpExt.TCPAbortOnMemory",
];

/// Sysctls that matter to a web server under load, read once.
const SYSCTLS: &[&str] = &[
    "net/core/somaxconn",
    "net/core/netdev_max_backlog",
    "net/core/rmem_max",
    "net/core/wmem_max",
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

/// Everything watched during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    /// Sampling interval, seconds.
    pub sample_interval_s: f64,
    /// What was watched.
    pub topology: Topology,
    /// Facts read once: sysctls, kernel, CPUs, cgroup limits.
    pub host: HostFacts,
    /// Timestamped samples: rates over each interval and gauges at its end.
    pub samples: Vec<Sample>,
    /// Deltas over exactly the load window.
    pub window: Window,
    /// Sources that could not be read, and why (the run went on without them).
    pub warnings: Vec<String>,
    /// The sampler thread's own CPU use over the window, percent of one core: the cost
    /// of watching (target ≤ 1% at 1 s samples). Discovery before the load is not
    /// included.
    pub sampler_cpu_pct: f64,
}

/// Read once before the load.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFacts {
    /// `uname -r`.
    pub kernel: String,
    /// CPUs online.
    pub cpus: u32,
    /// CPUs loadlens may run on (its affinity mask).
    pub loadgen_cpus: Vec<u32>,
    /// Sysctl name (dotted, `net.core.somaxconn`) → value, from the server's network
    /// namespace for per-namespace ones.
    pub sysctls: BTreeMap<String, String>,
    /// Interface → link speed in Mbit/s, where the link reports one.
    pub link_speed_mbps: BTreeMap<String, u64>,
    /// Interface → rate of a token-bucket qdisc (`tc ... tbf rate`) on it, bytes/s: an
    /// emulated or shaped link, whatever the interface's own speed.
    #[serde(default)]
    pub qdisc_rate_bytes_per_s: BTreeMap<String, u64>,
    /// CPU quota of loadlens's cgroup: v2 `cpu.max` (`max 100000` = none) or v1
    /// `cfs_quota_us cfs_period_us` (`-1 100000` = none).
    pub cgroup_cpu_max: Option<String>,
}

/// CPU time shares over an interval, percent of that CPU.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct CpuPct {
    pub cpu: u32,
    pub user: f64,
    pub system: f64,
    pub irq: f64,
    pub softirq: f64,
    pub iowait: f64,
    pub steal: f64,
    pub idle: f64,
}

/// One interface over an interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct IfaceRate {
    pub name: String,
    pub rx_bytes_per_s: f64,
    pub tx_bytes_per_s: f64,
    pub rx_packets_per_s: f64,
    pub tx_packets_per_s: f64,
    /// Packets dropped (rx + tx) over the interval.
    pub drops: u64,
    /// max(rx, tx) bits/s ÷ link speed, percent; `None` when the link has no speed
    /// (loopback, veth).
    pub util_pct: Option<f64>,
}

/// A listening socket's accept queue at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct QueueGauge {
    pub addr: String,
    pub queue: u32,
    pub backlog: u32,
}

/// One server process over an interval (or over the window).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct ProcRates {
    pub pid: i32,
    pub comm: String,
    pub role: String,
    /// CPU use, percent of one core (user + system), and its parts.
    pub cpu_pct: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    /// Time spent runnable but waiting for a CPU, ms per second (schedstat).
    pub run_delay_ms_per_s: Option<f64>,
    pub voluntary_ctxt_switches_per_s: f64,
    pub nonvoluntary_ctxt_switches_per_s: f64,
    /// Read-like syscalls per second and bytes per such syscall (/proc/PID/io rchar and
    /// syscr). The kernel counts read/readv/pread here, socket reads through them too,
    /// but not recv/recvfrom; likewise write/writev/sendfile but not send/sendto. nginx
    /// reads upstream responses with readv and writes responses with writev, so these
    /// show its proxy buffer sizes. `None` when io is unreadable or no call was made.
    pub reads_per_s: Option<f64>,
    pub bytes_per_read: Option<f64>,
    pub writes_per_s: Option<f64>,
    pub bytes_per_write: Option<f64>,
    pub minor_faults_per_s: f64,
    /// State at the end (R, S, D, T, …) and the CPU it last ran on.
    pub state: String,
    pub last_cpu: u32,
    pub threads: u64,
    pub rss_kb: u64,
    /// Open file descriptors at the end, and the soft limit.
    pub fds: Option<u64>,
    pub fd_limit: Option<u64>,
}

/// One sample: rates over the interval that ended at `t_s`, gauges at `t_s`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    /// Seconds from the start of the load window.
    pub t_s: f64,
    pub cpus: Vec<CpuPct>,
    pub ifaces: Vec<IfaceRate>,
    /// Selected TCP counters as per-second rates.
    pub tcp_per_s: BTreeMap<String, f64>,
    /// `TCP.tw`, `TCP.inuse`, `TCP.orphan`, `TCP.alloc`, `TCP.mem` (pages).
    pub sockstat: BTreeMap<String, u64>,
    pub conntrack_count: Option<u64>,
    pub listen_queues: Vec<QueueGauge>,
    pub processes: Vec<ProcRates>,
    /// /proc/pressure/cpu `some avg10`.
    pub cpu_pressure_avg10: Option<f64>,
    /// Load average (1 min) and runnable tasks.
    pub load1: Option<f64>,
    pub runnable: Option<u64>,
}

/// Deltas over exactly the load window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Window {
    pub duration_s: f64,
    /// CPU shares per CPU over the window.
    pub cpus: Vec<CpuPct>,
    pub ifaces: Vec<IfaceRate>,
    /// Every Tcp/TcpExt/Ip/IpExt/Udp… counter that moved: `TcpExt.ListenOverflows` → Δ.
    pub counters: BTreeMap<String, u64>,
    /// Per CPU: NET_RX softirqs, and softnet packets processed / dropped / squeezed.
    pub net_rx_softirqs: Vec<u64>,
    pub softnet_dropped: u64,
    pub softnet_time_squeeze: u64,
    /// sockstat gauges at the end of the window.
    pub sockstat_end: BTreeMap<String, u64>,
    /// Highest `TCP.tw` seen in any sample.
    pub time_wait_max: u64,
    pub conntrack: Option<Conntrack>,
    /// Each listener: highest accept queue seen, its backlog, and in how many samples
    /// the queue was at the backlog.
    pub listen_queues: Vec<QueueMax>,
    pub processes: Vec<ProcRates>,
    /// CPU pressure stall time over the window, ms.
    pub cpu_pressure_stall_ms: Option<f64>,
    /// Time loadlens's cgroup was throttled by its CPU quota over the window, ms
    /// (cgroup v2 `throttled_usec` or v1 `throttled_time`); `None` where unreadable.
    pub cgroup_throttled_ms: Option<f64>,
    /// Interface → packets a rate-limiting qdisc delayed (overlimits) and dropped.
    #[serde(default)]
    pub qdisc_overlimits: BTreeMap<String, u64>,
    #[serde(default)]
    pub qdisc_drops: BTreeMap<String, u64>,
    /// The busiest other processes on the machine over the window (not the watched
    /// server, not loadlens): who else competed for the CPUs.
    #[serde(default)]
    pub other_processes: Vec<OtherProcess>,
}

/// A process that is neither the server nor loadlens, with its CPU use over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OtherProcess {
    pub pid: i32,
    pub comm: String,
    /// Percent of one core.
    pub cpu_pct: f64,
    /// The CPU it last ran on.
    pub last_cpu: u32,
}

/// Every process's CPU ticks and last CPU, for [`OtherProcess`].
fn all_cpu_ticks() -> BTreeMap<i32, (String, u64, u32)> {
    all_pid_stats()
        .into_iter()
        .map(|(pid, st)| (pid, (st.comm, st.utime + st.stime, st.processor)))
        .collect()
}

/// Rate-limiting qdiscs in the calling thread's namespace: `tc -s -j qdisc show` (tc
/// inherits the thread's network namespace). Interface → (tbf rate bytes/s,
/// overlimits, drops).
fn qdiscs() -> BTreeMap<String, (u64, u64, u64)> {
    let Ok(out) = std::process::Command::new("tc")
        .args(["-s", "-j", "qdisc", "show"])
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return BTreeMap::new();
    };
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut m = BTreeMap::new();
    for q in v.as_array().into_iter().flatten() {
        let (Some(dev), Some(rate)) = (q["dev"].as_str(), q["options"]["rate"].as_u64()) else {
            continue;
        };
        if q["kind"] == "tbf" {
            m.insert(
                dev.to_string(),
                (
                    rate,
                    q["overlimits"].as_u64().unwrap_or(0),
                    q["drops"].as_u64().unwrap_or(0),
                ),
            );
        }
    }
    m
}

/// Conntrack over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Conntrack {
    pub count_max_seen: u64,
    pub max: u64,
    /// Δ of `/proc/net/stat/nf_conntrack` drop, early_drop, insert_failed.
    pub drop: u64,
    pub early_drop: u64,
    pub insert_failed: u64,
}

/// A listener's accept queue over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueMax {
    pub addr: String,
    pub max_queue: u32,
    pub backlog: u32,
    /// Samples in which the queue was at (or past) the backlog.
    pub samples_full: u32,
    pub samples: u32,
}

/// How to watch: what the user asked.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    pub interval: Duration,
    pub target: SocketAddr,
    pub hints: Hints,
}

/// One moment's cumulative counters and gauges.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    at: Option<Instant>,
    cpus: BTreeMap<u32, CpuTimes>,
    net_rx: Vec<u64>,
    softnet: Vec<Softnet>,
    netdev: BTreeMap<String, NetDev>,
    counters: BTreeMap<String, u64>,
    sockstat: BTreeMap<String, u64>,
    conntrack_count: Option<u64>,
    conntrack_stat: BTreeMap<String, u64>,
    psi: Option<(f64, u64)>,
    load: Option<(f64, u64)>,
    throttled_ns: Option<u64>,
    /// Only in the before/after snapshots (spawning tc and scanning /proc each sample
    /// would cost more than the rest of the sample).
    qdiscs: BTreeMap<String, (u64, u64, u64)>,
    all_ticks: BTreeMap<i32, (String, u64, u32)>,
    procs: BTreeMap<i32, ProcSnap>,
    listeners: Vec<Listener>,
}

#[derive(Debug, Clone, Default)]
struct ProcSnap {
    stat: PidStat,
    status: PidStatus,
    sched: Option<(u64, u64)>,
    io: Option<PidIo>,
    fds: Option<u64>,
    fd_limit: Option<u64>,
}

/// Reads snapshots; remembers which sources failed so each is warned about once.
struct Reader {
    net: String,
    procs: Vec<discover::ServerProcess>,
    diag: Option<Diag>,
    port: u16,
    unix_inodes: BTreeSet<u64>,
    missing: BTreeSet<String>,
    warnings: Vec<String>,
    clk_tck: f64,
    speeds: BTreeMap<String, u64>,
}

impl Reader {
    fn read(&mut self, path: &str) -> Option<String> {
        match std::fs::read_to_string(path) {
            Ok(t) => Some(t),
            Err(e) => {
                if self.missing.insert(path.to_string()) {
                    let why = match e.kind() {
                        std::io::ErrorKind::NotFound => "not present in this kernel".to_string(),
                        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
                        _ => e.to_string(),
                    };
                    self.warnings.push(format!("{path} not read: {why}"));
                }
                None
            }
        }
    }

    fn snapshot(&mut self) -> Snapshot {
        let mut s = Snapshot {
            at: Some(Instant::now()),
            ..Snapshot::default()
        };
        if let Some(t) = self.read("/proc/stat") {
            s.cpus = parse_stat(&t);
        }
        if let Some(t) = self.read("/proc/softirqs") {
            s.net_rx = parse_softirqs(&t).remove("NET_RX").unwrap_or_default();
        }
        let net = self.net.clone();
        if let Some(t) = self.read(&format!("{net}/softnet_stat")) {
            s.softnet = parse_softnet(&t);
        }
        if let Some(t) = self.read(&format!("{net}/dev")) {
            s.netdev = parse_net_dev(&t);
        }
        if let Some(t) = self.read(&format!("{net}/snmp")) {
            s.counters = parse_snmp(&t);
        }
        if let Some(t) = self.read(&format!("{net}/netstat")) {
            s.counters.extend(parse_snmp(&t));
        }
        if let Some(t) = self.read(&format!("{net}/sockstat")) {
            s.sockstat = parse_sockstat(&t);
        }
        if let Some(t) = self.read(&format!("{net}/sockstat6")) {
            s.sockstat.extend(parse_sockstat(&t));
        }
        // Conntrack is optional: quietly absent when the module is not loaded.
        let ct = format!("{}/sys/net/netfilter/nf_conntrack_count", self.sys_root());
        s.conntrack_count = std::fs::read_to_string(ct)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        if s.conntrack_count.is_some() {
            if let Ok(t) = std::fs::read_to_string(format!("{net}/stat/nf_conntrack")) {
                s.conntrack_stat = parse_nf_conntrack_stat(&t);
            }
        }
        s.psi = std::fs::read_to_string("/proc/pressure/cpu")
            .ok()
            .and_then(|t| parse_pressure(&t));
        s.load = self.read("/proc/loadavg").and_then(|t| parse_loadavg(&t));
        s.throttled_ns = cgroup_throttled_ns();
        for p in self.procs.clone() {
            let pid = p.pid;
            let Some(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| parse_pid_stat(&t))
            else {
                continue; // exited (a worker replaced): no longer watched
            };
            let status = self
                .read(&format!("/proc/{pid}/status"))
                .map(|t| parse_pid_status(&t))
                .unwrap_or_default();
            let sched = self
                .read(&format!("/proc/{pid}/schedstat"))
                .and_then(|t| parse_schedstat(&t));
            let io = self
                .read(&format!("/proc/{pid}/io"))
                .and_then(|t| parse_pid_io(&t));
            let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .ok()
                .map(|d| d.count() as u64);
            let fd_limit = std::fs::read_to_string(format!("/proc/{pid}/limits"))
                .ok()
                .and_then(|t| parse_limits_nofile(&t));
            s.procs.insert(
                pid,
                ProcSnap {
                    stat,
                    status,
                    sched,
                    io,
                    fds,
                    fd_limit,
                },
            );
        }
        if let Some(d) = self.diag.as_mut() {
            if let Ok(ls) = d.tcp_listeners(Some(self.port)) {
                s.listeners = ls;
            }
            if !self.unix_inodes.is_empty() {
                if let Ok(us) = d.unix_listeners() {
                    s.listeners.extend(
                        us.into_iter()
                            .filter(|u| self.unix_inodes.contains(&u.inode)),
                    );
                }
            }
        }
        s
    }

    /// `/proc/sys`: per-namespace sysctls (net.*) show the namespace of the reading
    /// thread, which has joined the server's.
    fn sys_root(&self) -> &'static str {
        "/proc"
    }

    fn host_facts(&mut self) -> HostFacts {
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
            cpus: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1)
                .max(affinity.len() as u32),
            loadgen_cpus: affinity,
            sysctls,
            link_speed_mbps: self.speeds.clone(),
            cgroup_cpu_max: cgroup_cpu_max(),
            qdisc_rate_bytes_per_s: BTreeMap::new(),
        }
    }

    fn rates(
        &self,
        a: &Snapshot,
        b: &Snapshot,
    ) -> (f64, Vec<CpuPct>, Vec<IfaceRate>, Vec<ProcRates>) {
        let dt = match (a.at, b.at) {
            (Some(x), Some(y)) => y.duration_since(x).as_secs_f64().max(1e-6),
            _ => 1.0,
        };
        let cpus = b
            .cpus
            .iter()
            .filter_map(|(id, t)| {
                let d = t.delta(a.cpus.get(id)?);
                let tot = d.total().max(1) as f64;
                let pct = |x: u64| x as f64 * 100.0 / tot;
                Some(CpuPct {
                    cpu: *id,
                    user: pct(d.user + d.nice),
                    system: pct(d.system),
                    irq: pct(d.irq),
                    softirq: pct(d.softirq),
                    iowait: pct(d.iowait),
                    steal: pct(d.steal),
                    idle: pct(d.idle),
                })
            })
            .collect();
        let ifaces = b
            .netdev
            .iter()
            .filter_map(|(name, n)| {
                let o = a.netdev.get(name)?;
                let rx = n.rx_bytes.saturating_sub(o.rx_bytes) as f64 / dt;
                let tx = n.tx_bytes.saturating_sub(o.tx_bytes) as f64 / dt;
                Some(IfaceRate {
                    name: name.clone(),
                    rx_bytes_per_s: rx,
                    tx_bytes_per_s: tx,
                    rx_packets_per_s: n.rx_packets.saturating_sub(o.rx_packets) as f64 / dt,
                    tx_packets_per_s: n.tx_packets.saturating_sub(o.tx_packets) as f64 / dt,
                    drops: (n.rx_drops + n.tx_drops).saturating_sub(o.rx_drops + o.tx_drops),
                    util_pct: self
                        .speeds
                        .get(name)
                        .map(|mbps| rx.max(tx) * 8.0 * 100.0 / (*mbps as f64 * 1e6)),
                })
            })
            .collect();
        let procs = self
            .procs
            .iter()
            .filter_map(|p| {
                let (x, y) = (a.procs.get(&p.pid)?, b.procs.get(&p.pid)?);
                let ticks = |v: u64| v as f64 / self.clk_tck / dt * 100.0;
                let user = ticks(y.stat.utime.saturating_sub(x.stat.utime));
                let system = ticks(y.stat.stime.saturating_sub(x.stat.stime));
                let io = match (x.io, y.io) {
                    (Some(i), Some(j)) => Some((
                        j.syscr.saturating_sub(i.syscr),
                        j.rchar.saturating_sub(i.rchar),
                        j.syscw.saturating_sub(i.syscw),
                        j.wchar.saturating_sub(i.wchar),
                    )),
                    _ => None,
                };
                let per = |calls: u64, bytes: u64| (calls > 0).then(|| bytes as f64 / calls as f64);
                Some(ProcRates {
                    pid: p.pid,
                    comm: p.comm.clone(),
                    role: p.role.clone(),
                    cpu_pct: user + system,
                    user_pct: user,
                    system_pct: system,
                    run_delay_ms_per_s: match (x.sched, y.sched) {
                        (Some(i), Some(j)) => Some(j.1.saturating_sub(i.1) as f64 / 1e6 / dt),
                        _ => None,
                    },
                    voluntary_ctxt_switches_per_s: y
                        .status
                        .voluntary_ctxt_switches
                        .saturating_sub(x.status.voluntary_ctxt_switches)
                        as f64
                        / dt,
                    nonvoluntary_ctxt_switches_per_s: y
                        .status
                        .nonvoluntary_ctxt_switches
                        .saturating_sub(x.status.nonvoluntary_ctxt_switches)
                        as f64
                        / dt,
                    reads_per_s: io.map(|(c, _, _, _)| c as f64 / dt),
                    bytes_per_read: io.and_then(|(c, b, _, _)| per(c, b)),
                    writes_per_s: io.map(|(_, _, c, _)| c as f64 / dt),
                    bytes_per_write: io.and_then(|(_, _, c, b)| per(c, b)),
                    minor_faults_per_s: y.stat.minflt.saturating_sub(x.stat.minflt) as f64 / dt,
                    state: y.stat.state.to_string(),
                    last_cpu: y.stat.processor,
                    threads: y.stat.num_threads,
                    rss_kb: y.status.vm_rss_kb,
                    fds: y.fds,
                    fd_limit: y.fd_limit,
                })
            })
            .collect();
        (dt, cpus, ifaces, procs)
    }

    /// The busiest processes that are neither watched nor loadlens, over a..b.
    fn others(&self, a: &Snapshot, b: &Snapshot, dt: f64) -> Vec<OtherProcess> {
        let me = std::process::id() as i32;
        let mut v: Vec<OtherProcess> = b
            .all_ticks
            .iter()
            .filter(|(pid, _)| **pid != me && !self.procs.iter().any(|p| p.pid == **pid))
            .filter_map(|(pid, (comm, ticks, cpu))| {
                let before = a.all_ticks.get(pid).map_or(0, |x| x.1);
                let pct = ticks.saturating_sub(before) as f64 / self.clk_tck / dt * 100.0;
                (pct >= 1.0).then(|| OtherProcess {
                    pid: *pid,
                    comm: comm.clone(),
                    cpu_pct: pct,
                    last_cpu: *cpu,
                })
            })
            .collect();
        v.sort_by(|x, y| y.cpu_pct.total_cmp(&x.cpu_pct));
        v.truncate(5);
        v
    }

    fn sample(&self, start: Instant, a: &Snapshot, b: &Snapshot) -> Sample {
        let (dt, cpus, ifaces, processes) = self.rates(a, b);
        let tcp_per_s = SERIES_COUNTERS
            .iter()
            .filter_map(|k| {
                let d = b.counters.get(*k)?.saturating_sub(*a.counters.get(*k)?);
                Some((k.to_string(), d as f64 / dt))
            })
            .collect();
        Sample {
            t_s: b
                .at
                .map(|t| t.saturating_duration_since(start).as_secs_f64())
                .unwrap_or(0.0),
            cpus,
            ifaces,
            tcp_per_s,
            sockstat: b
                .sockstat
                .iter()
                .filter(|(k, _)| k.starts_with("TCP."))
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            conntrack_count: b.conntrack_count,
            listen_queues: b
                .listeners
                .iter()
                .map(|l| QueueGauge {
                    addr: l.addr.clone(),
                    queue: l.queue,
                    backlog: l.backlog,
                })
                .collect(),
            processes,
            cpu_pressure_avg10: b.psi.map(|p| p.0),
            load1: b.load.map(|l| l.0),
            runnable: b.load.map(|l| l.1),
        }
    }

    fn window(&self, a: &Snapshot, b: &Snapshot, samples: &[Sample], all: &[Snapshot]) -> Window {
        let (dt, cpus, ifaces, processes) = self.rates(a, b);
        let counters = b
            .counters
            .iter()
            .filter_map(|(k, v)| {
                let d = v.saturating_sub(*a.counters.get(k)?);
                (d > 0).then(|| (k.clone(), d))
            })
            .collect();
        let sum = |f: fn(&Softnet) -> u64, s: &Snapshot| s.softnet.iter().map(f).sum::<u64>();
        let conntrack = b.conntrack_count.map(|_| {
            let d = |k: &str| {
                b.conntrack_stat
                    .get(k)
                    .unwrap_or(&0)
                    .saturating_sub(*a.conntrack_stat.get(k).unwrap_or(&0))
            };
            Conntrack {
                count_max_seen: all
                    .iter()
                    .filter_map(|s| s.conntrack_count)
                    .max()
                    .unwrap_or(0),
                max: std::fs::read_to_string(format!(
                    "{}/sys/net/netfilter/nf_conntrack_max",
                    self.sys_root()
                ))
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0),
                drop: d("drop"),
                early_drop: d("early_drop"),
                insert_failed: d("insert_failed"),
            }
        });
        let mut queues: BTreeMap<String, QueueMax> = BTreeMap::new();
        for s in all {
            for l in &s.listeners {
                let q = queues.entry(l.addr.clone()).or_insert_with(|| QueueMax {
                    addr: l.addr.clone(),
                    ..QueueMax::default()
                });
                q.max_queue = q.max_queue.max(l.queue);
                q.backlog = l.backlog;
                q.samples += 1;
                if l.backlog > 0 && l.queue >= l.backlog {
                    q.samples_full += 1;
                }
            }
        }
        Window {
            duration_s: dt,
            cpus,
            ifaces,
            counters,
            net_rx_softirqs: b
                .net_rx
                .iter()
                .zip(a.net_rx.iter().chain(std::iter::repeat(&0)))
                .map(|(y, x)| y.saturating_sub(*x))
                .collect(),
            softnet_dropped: sum(|s| s.dropped, b).saturating_sub(sum(|s| s.dropped, a)),
            softnet_time_squeeze: sum(|s| s.time_squeeze, b)
                .saturating_sub(sum(|s| s.time_squeeze, a)),
            sockstat_end: b.sockstat.clone(),
            time_wait_max: samples
                .iter()
                .filter_map(|s| s.sockstat.get("TCP.tw").copied())
                .chain(b.sockstat.get("TCP.tw").copied())
                .max()
                .unwrap_or(0),
            conntrack,
            listen_queues: queues.into_values().collect(),
            processes,
            cpu_pressure_stall_ms: match (a.psi, b.psi) {
                (Some(x), Some(y)) => Some(y.1.saturating_sub(x.1) as f64 / 1e3),
                _ => None,
            },
            cgroup_throttled_ms: match (a.throttled_ns, b.throttled_ns) {
                (Some(x), Some(y)) => Some(y.saturating_sub(x) as f64 / 1e6),
                _ => None,
            },
            qdisc_overlimits: b
                .qdiscs
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.1.saturating_sub(a.qdiscs.get(k).map_or(0, |x| x.1)),
                    )
                })
                .collect(),
            qdisc_drops: b
                .qdiscs
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.2.saturating_sub(a.qdiscs.get(k).map_or(0, |x| x.2)),
                    )
                })
                .collect(),
            other_processes: self.others(a, b, dt),
        }
    }
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
fn cgroup_cpu_max() -> Option<String> {
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
fn cgroup_throttled_ns() -> Option<u64> {
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

fn link_speeds() -> BTreeMap<String, u64> {
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

/// A running watch: the sampler thread and what it needs to finish.
pub struct Watch {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Evidence>,
}

impl Watch {
    /// Starts the sampler thread, which joins the server's network namespace when it
    /// has its own, discovers the target and takes the `before` snapshot; returns once
    /// that is done. Call right before the load starts; [`Watch::finish`] right after.
    pub fn start(spec: WatchSpec) -> Watch {
        let (tx, rx) = mpsc::channel::<()>();
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("loadlens-watch".into())
            .spawn(move || sampler(spec, rx, ready_tx))
            .expect("cannot start the sampler thread");
        // The thread signals (or, if it died, drops the sender) once `before` is taken.
        let _ = ready_rx.recv();
        Watch { stop: tx, thread }
    }

    /// Stops sampling, takes the `after` snapshot and returns the evidence.
    pub fn finish(self) -> Evidence {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

/// The sampler thread: set-up, then a sample every interval until told to stop.
fn sampler(spec: WatchSpec, stop: mpsc::Receiver<()>, ready: mpsc::Sender<()>) -> Evidence {
    let mut warnings = Vec::new();
    let hinted = discover::hinted(&spec.hints, &mut warnings);
    // Join the server's network namespace, so /proc/thread-self/net, /proc/sys/net and
    // sock_diag all show what the server sees.
    let mut netns = "loadlens".to_string();
    if let Some(&pid) = hinted.iter().next() {
        match sockdiag::in_netns_of(pid) {
            Ok(true) => {}
            Ok(false) => match sockdiag::enter_netns_of(pid) {
                Ok(()) => netns = format!("pid {pid}"),
                Err(e) => warnings.push(format!(
                    "server pid {pid} is in another network namespace that loadlens cannot join ({e}; needs root): network counters are loadlens's own"
                )),
            },
            Err(e) => warnings.push(format!("cannot read /proc/{pid}/ns/net: {e}")),
        }
    }
    let mut diag = match Diag::open() {
        Ok(d) => Some(d),
        Err(e) => {
            warnings.push(format!(
                "listen queues not watched: sock_diag unavailable ({e})"
            ));
            None
        }
    };
    let found = discover::discover(spec.target, &hinted, &netns, diag.as_mut());
    warnings.extend(found.warnings);
    let clk_tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut reader = Reader {
        net: "/proc/thread-self/net".to_string(),
        procs: found.topology.processes.clone(),
        diag: if found.topology.listeners.is_empty() {
            None
        } else {
            diag
        },
        port: spec.target.port(),
        unix_inodes: found
            .topology
            .unix_listeners
            .iter()
            .map(|u| u.inode)
            .collect(),
        missing: BTreeSet::new(),
        warnings,
        clk_tck,
        // /sys/class/net shows the namespace that mounted /sys, not the one this thread
        // joined: link speeds are only known for loadlens's own namespace.
        speeds: if netns == "loadlens" {
            link_speeds()
        } else {
            BTreeMap::new()
        },
    };
    let mut host = reader.host_facts();
    let topology = found.topology;
    let interval = spec.interval;
    let mut before = reader.snapshot();
    before.qdiscs = qdiscs();
    before.all_ticks = all_cpu_ticks();
    host.qdisc_rate_bytes_per_s = before
        .qdiscs
        .iter()
        .map(|(k, v)| (k.clone(), v.0))
        .collect();
    // Set-up (discovery) is a one-time cost; this measures the cost of sampling.
    let cpu_at_start = ThreadCpuSample::now();
    let _ = ready.send(());
    let start = before.at.unwrap_or_else(Instant::now);
    let mut samples = Vec::new();
    let mut snaps = vec![before.clone()];
    let mut prev = before.clone();
    let mut next = start + interval;
    let mut dropped = false;
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        match stop.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => break,
        }
        next += interval;
        let cur = reader.snapshot();
        if samples.len() < MAX_SAMPLES {
            samples.push(reader.sample(start, &prev, &cur));
            // Keep only what the window needs from each snapshot.
            snaps.push(Snapshot {
                at: cur.at,
                conntrack_count: cur.conntrack_count,
                listeners: cur.listeners.clone(),
                ..Snapshot::default()
            });
        } else if !dropped {
            dropped = true;
            reader.warnings.push(format!(
                "more than {MAX_SAMPLES} samples: later ones not kept (window deltas are complete)"
            ));
        }
        prev = cur;
    }
    let mut after = reader.snapshot();
    after.qdiscs = qdiscs();
    after.all_ticks = all_cpu_ticks();
    // The partial last interval, so even a short run has a sample.
    samples.push(reader.sample(start, &prev, &after));
    snaps.push(after.clone());
    let window = reader.window(&before, &after, &samples, &snaps);
    let sampler_cpu_pct = ThreadCpuSample::now()
        .since(&cpu_at_start, Duration::from_secs_f64(window.duration_s))
        .busy_pct;
    Evidence {
        sampler_cpu_pct,
        sample_interval_s: interval.as_secs_f64(),
        topology,
        host,
        samples,
        window,
        warnings: reader.warnings,
    }
}
