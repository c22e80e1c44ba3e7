//! One moment's cumulative counters and gauges, read from every source the watch uses
//! (/proc, /sys, netlink sock_diag, the cgroup, `tc`), and the [`Reader`] that reads them
//! and warns once about each source it cannot read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use crate::run::{Listener, ServerProcess, UdpCounters};
use crate::sys::cgroup::cgroup_throttled_ns;
use crate::sys::procfs::*;
use crate::sys::sockdiag::{ConnStats, Diag, UdpSock};
use crate::sys::udp::{parse_udp6, udp_of};

/// One moment's cumulative counters and gauges.
#[derive(Debug, Clone, Default)]
pub(super) struct Snapshot {
    pub(super) at: Option<Instant>,
    pub(super) cpus: BTreeMap<u32, CpuTimes>,
    pub(super) net_rx: Vec<u64>,
    pub(super) softnet: Vec<Softnet>,
    pub(super) netdev: BTreeMap<String, NetDev>,
    pub(super) counters: BTreeMap<String, u64>,
    pub(super) sockstat: BTreeMap<String, u64>,
    pub(super) conntrack_count: Option<u64>,
    pub(super) conntrack_stat: BTreeMap<String, u64>,
    pub(super) psi: Option<(f64, u64)>,
    pub(super) load: Option<(f64, u64)>,
    pub(super) throttled_ns: Option<u64>,
    /// Only in the before/after snapshots (spawning tc and scanning /proc each sample
    /// would cost more than the rest of the sample).
    pub(super) qdiscs: BTreeMap<String, (u64, u64, u64)>,
    /// The server processes' CPU cgroups with a quota (before/after only).
    pub(super) quotas: Vec<crate::sys::cgroup::QuotaReading>,
    pub(super) all_ticks: BTreeMap<i32, PidStat>,
    pub(super) procs: BTreeMap<i32, ProcSnap>,
    pub(super) listeners: Vec<Listener>,
    pub(super) conns: Option<ConnSnap>,
    /// Established connections on the upstreams' TCP ports (read with the
    /// connections, every [`CONNS_EVERY`]): the requests the front has in them.
    pub(super) upstream_conns: Option<u32>,
    /// `/proc/net/snmp` Udp and `/proc/net/snmp6` Udp6.
    pub(super) udp: Option<UdpCounters>,
    pub(super) udp6: Option<UdpCounters>,
    /// The watched processes' UDP sockets.
    pub(super) udp_sockets: Vec<UdpSock>,
}

/// The server's connections at one moment: medians of their gauges, and their
/// send-time chronograph summed since the watch began (a counter, as if one socket).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct ConnSnap {
    pub(super) sockets: u32,
    pub(super) send_buffer: u32,
    pub(super) peer_window: u32,
    pub(super) rtt_us: u32,
    /// busy, rwnd-limited, sndbuf-limited, µs.
    pub(super) chrono_us: [u64; 3],
}

#[derive(Debug, Clone, Default)]
pub(super) struct ProcSnap {
    pub(super) stat: PidStat,
    pub(super) status: PidStatus,
    pub(super) sched: Option<(u64, u64)>,
    pub(super) io: Option<PidIo>,
    pub(super) fds: Option<u64>,
    pub(super) fd_limit: Option<u64>,
    /// Each thread's user + system ticks, for a process of several threads (its
    /// busiest thread may be the limit: an event loop, Node's main thread).
    pub(super) thread_ticks: BTreeMap<i32, u64>,
}

/// The CPU ticks of each thread of `pid` (at most 1,024 threads are read: a pool
/// larger than that is not one busy loop).
fn thread_ticks(pid: i32) -> BTreeMap<i32, u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return BTreeMap::new();
    };
    dir.flatten()
        .take(1024)
        .filter_map(|e| {
            let tid: i32 = e.file_name().to_str()?.parse().ok()?;
            let t = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
            let st = parse_pid_stat(&t)?;
            Some((tid, st.utime + st.stime))
        })
        .collect()
}

/// Reads snapshots; remembers which sources failed so each is warned about once.
pub(super) struct Reader {
    pub(super) net: String,
    pub(super) procs: Vec<ServerProcess>,
    pub(super) diag: Option<Diag>,
    pub(super) port: u16,
    pub(super) unix_inodes: BTreeSet<u64>,
    /// The watched processes' sockets (any kind; a UDP one among them is the server's),
    /// read again at the window's first and last snapshots.
    pub(super) udp_inodes: BTreeSet<u64>,
    /// The upstreams' TCP listeners: their ports, and their sockets among those ports'.
    pub(super) upstream_ports: BTreeSet<u16>,
    pub(super) upstream_inodes: BTreeSet<u64>,
    pub(super) missing: BTreeSet<String>,
    pub(super) warnings: Vec<String>,
    pub(super) clk_tck: f64,
    pub(super) speeds: BTreeMap<String, u64>,
    /// Each connection's chronograph at the last sample (by cookie), and the sum of
    /// what every connection added since the watch began.
    pub(super) conn_seen: BTreeMap<u64, [u64; 3]>,
    pub(super) conn_chrono: [u64; 3],
    /// When the connections were last read (see [`CONNS_EVERY`]).
    pub(super) conns_at: Option<Instant>,
}

/// How often a sample reads the server's connections at most. Each read is a sock_diag
/// dump that walks the kernel's whole established-socket hash (262,144 buckets on a
/// 23 GB machine, whatever the connections), so at 100 ms it was most of the sampler's
/// CPU; the chronograph is cumulative per connection, so reading it less often loses
/// only connections that open and close between two reads.
const CONNS_EVERY: std::time::Duration = std::time::Duration::from_millis(900);

impl Reader {
    pub(super) fn read(&mut self, path: &str) -> Option<String> {
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

    /// Reads everything; the connections only when `all` (the window's first and last
    /// snapshots) or when [`CONNS_EVERY`] has passed since they were last read.
    pub(super) fn snapshot(&mut self, all: bool) -> Snapshot {
        let now = Instant::now();
        let mut s = Snapshot {
            at: Some(now),
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
        s.udp = udp_of(&s.counters);
        // Absent where IPv6 is off: quietly.
        s.udp6 = std::fs::read_to_string(format!("{net}/snmp6"))
            .ok()
            .and_then(|t| parse_udp6(&t));
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
            let thread_ticks = if stat.num_threads > 1 {
                thread_ticks(pid)
            } else {
                BTreeMap::new()
            };
            s.procs.insert(
                pid,
                ProcSnap {
                    thread_ticks,
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
            let due = all || self.conns_at.is_none_or(|t| now - t >= CONNS_EVERY);
            if due {
                if let Ok(cs) = d.tcp_connections(self.port, &s.listeners) {
                    s.conns = Some(conn_snap(&mut self.conn_seen, &mut self.conn_chrono, &cs));
                    self.conns_at = Some(now);
                }
            }
            let mut in_upstreams = None;
            for port in &self.upstream_ports {
                if let Ok(ls) = d.tcp_listeners(Some(*port)) {
                    let ls: Vec<Listener> = ls
                        .into_iter()
                        .filter(|l| self.upstream_inodes.contains(&l.inode))
                        .collect();
                    if due && !ls.is_empty() {
                        if let Ok(n) = d.tcp_established_count(*port, &ls) {
                            *in_upstreams.get_or_insert(0) += n;
                        }
                    }
                    s.listeners.extend(ls);
                }
            }
            s.upstream_conns = in_upstreams;
            if all {
                self.udp_inodes = self
                    .procs
                    .iter()
                    .filter_map(|p| super::discover::socket_inodes(p.pid))
                    .flatten()
                    .collect();
            }
            if !self.udp_inodes.is_empty() {
                if let Ok(us) = d.udp_sockets() {
                    s.udp_sockets = us
                        .into_iter()
                        .filter(|u| self.udp_inodes.contains(&u.inode))
                        .collect();
                }
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
    pub(super) fn sys_root(&self) -> &'static str {
        "/proc"
    }
}

/// Adds what each connection's chronograph moved since the last sample (all of it
/// for a connection not seen before) and takes the medians of the gauges.
fn conn_snap(
    seen_before: &mut BTreeMap<u64, [u64; 3]>,
    total: &mut [u64; 3],
    conns: &[ConnStats],
) -> ConnSnap {
    let mut seen = BTreeMap::new();
    for c in conns {
        let now = [c.busy_us, c.rwnd_limited_us, c.sndbuf_limited_us];
        let was = seen_before.get(&c.cookie).copied().unwrap_or_default();
        for i in 0..3 {
            total[i] += now[i].saturating_sub(was[i]);
        }
        seen.insert(c.cookie, now);
    }
    *seen_before = seen;
    let median = |f: fn(&ConnStats) -> u32| {
        let mut v: Vec<u32> = conns.iter().map(f).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    ConnSnap {
        sockets: conns.len() as u32,
        send_buffer: median(|c| c.send_buffer),
        peer_window: median(|c| c.peer_window),
        rtt_us: median(|c| c.rtt_us),
        chrono_us: *total,
    }
}

/// Every process's CPU ticks, last CPU and priority, for [`OtherProcess`].
pub(super) fn all_cpu_ticks() -> BTreeMap<i32, PidStat> {
    all_pid_stats()
}

/// Rate-limiting qdiscs in the calling thread's namespace: `tc -s -j qdisc show` (tc
/// inherits the thread's network namespace). Interface → (tbf rate bytes/s,
/// overlimits, drops).
pub(super) fn qdiscs() -> BTreeMap<String, (u64, u64, u64)> {
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
