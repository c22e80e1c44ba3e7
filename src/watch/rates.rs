//! From two snapshots to the record: per-interval [`Sample`]s (rates and gauges) and the
//! [`Window`] (deltas over exactly the load window).

use crate::run::Counter;
use std::collections::BTreeMap;
use std::time::Instant;

use crate::run::{
    CgroupQuota, ConnWindow, Conntrack, CpuPct, IfaceRate, OtherProcess, ProcRates, QueueGauge,
    QueueMax, Sample, UdpCounters, UdpSocketWindow, UdpWindow, Window,
};
use crate::sys::procfs::Softnet;

/// The scheduling policy that runs a task only on an otherwise idle CPU (sched(7)).
const SCHED_IDLE: u32 = 5;

use super::snapshot::{ConnSnap, Reader, Snapshot};

/// The counters that the sample series carries as per-second rates (the window deltas
/// carry every counter that moved).
const SERIES_COUNTERS: &[Counter] = &[
    Counter::ActiveOpens,
    Counter::PassiveOpens,
    Counter::AttemptFails,
    Counter::EstabResets,
    Counter::RetransSegs,
    Counter::OutRsts,
    Counter::InErrs,
    Counter::ListenOverflows,
    Counter::ListenDrops,
    Counter::ReqQFullDrop,
    Counter::SyncookiesSent,
    Counter::Timeouts,
    Counter::SynRetrans,
    Counter::TimeWait,
    Counter::TimeWaitOverflow,
    Counter::AbortOnData,
    Counter::AbortOnMemory,
];

/// The server's connections over the window: chronograph deltas, and the medians of
/// the samples in which connections were open.
fn conn_window(a: &Snapshot, b: &Snapshot, all: &[Snapshot]) -> Option<ConnWindow> {
    let (x, y) = (a.conns?, b.conns?);
    let open: Vec<ConnSnap> = all
        .iter()
        .filter_map(|s| s.conns)
        .filter(|c| c.sockets > 0)
        .collect();
    let median = |f: fn(&ConnSnap) -> u32| {
        let mut v: Vec<u32> = open.iter().map(f).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let ms = |i: usize| y.chrono_us[i].saturating_sub(x.chrono_us[i]) as f64 / 1e3;
    Some(ConnWindow {
        samples: open.len() as u32,
        sockets_max: open.iter().map(|c| c.sockets).max().unwrap_or(0),
        send_buffer_bytes: median(|c| c.send_buffer),
        peer_window_bytes: median(|c| c.peer_window),
        rtt_us: median(|c| c.rtt_us),
        busy_ms: ms(0),
        rwnd_limited_ms: ms(1),
        sndbuf_limited_ms: ms(2),
    })
}

impl Reader {
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
                    kind: p.kind,
                    role: p.role,
                    tier: p.tier,
                    cpu_pct: user + system,
                    busiest_thread_pct: (y.thread_ticks.len() > 1).then(|| {
                        y.thread_ticks
                            .iter()
                            // A thread born in the interval has no earlier reading.
                            .filter_map(|(tid, t)| {
                                Some(ticks(t.saturating_sub(*x.thread_ticks.get(tid)?)))
                            })
                            .fold(0.0, f64::max)
                    }),
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
                    fds_max: None,
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
            .filter_map(|(pid, st)| {
                let before = a.all_ticks.get(pid).map_or(0, |x| x.utime + x.stime);
                let ticks = (st.utime + st.stime).saturating_sub(before);
                let pct = ticks as f64 / self.clk_tck / dt * 100.0;
                (pct >= OtherProcess::MIN_PCT).then(|| OtherProcess {
                    pid: *pid,
                    comm: st.comm.clone(),
                    cpu_pct: pct,
                    last_cpu: st.processor,
                    nice: st.nice,
                    sched_idle: st.policy == SCHED_IDLE,
                })
            })
            .collect();
        v.sort_by(|x, y| y.cpu_pct.total_cmp(&x.cpu_pct));
        v.truncate(OtherProcess::LISTED);
        v
    }

    pub(super) fn sample(&self, start: Instant, a: &Snapshot, b: &Snapshot) -> Sample {
        let (dt, cpus, ifaces, processes) = self.rates(a, b);
        let tcp_per_s = SERIES_COUNTERS
            .iter()
            .filter_map(|k| {
                let d = b
                    .counters
                    .get(k.key())?
                    .saturating_sub(*a.counters.get(k.key())?);
                Some((k.key().to_string(), d as f64 / dt))
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
            upstream_connections: b.upstream_conns,
        }
    }

    pub(super) fn window(
        &self,
        a: &Snapshot,
        b: &Snapshot,
        samples: &[Sample],
        all: &[Snapshot],
    ) -> Window {
        let (dt, cpus, ifaces, mut processes) = self.rates(a, b);
        // Gauges over the run, not at its end: the most fds each process held.
        for p in processes.iter_mut() {
            p.fds_max = all
                .iter()
                .filter_map(|s| s.procs.get(&p.pid)?.fds)
                .chain(p.fds)
                .max();
        }
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
                if l.queue > 0 {
                    q.samples_queued += 1;
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
            cgroup_quotas: b
                .quotas
                .iter()
                .filter_map(|q| {
                    let earlier = a.quotas.iter().find(|x| x.dir == q.dir)?;
                    let d = q.stat.delta(&earlier.stat);
                    Some(CgroupQuota {
                        path: q.dir.clone(),
                        pids: q.pids.clone(),
                        cores: q.cores,
                        periods: d.periods,
                        throttled_periods: d.throttled_periods,
                        throttled_ms: d.throttled_ns as f64 / 1e6,
                    })
                })
                .collect(),
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
            server_connections: conn_window(a, b, all),
            udp: udp_window(a, b, all),
        }
    }
}

/// UDP over the window: the counters' deltas, and each of the server's UDP sockets
/// (by inode) with its buffers at the end, its highest queues in any snapshot, and the
/// drops it added since the first snapshot that saw it (a socket opened mid-run counts
/// from its first sighting). `None` when /proc/net/snmp was not read at both ends.
fn udp_window(a: &Snapshot, b: &Snapshot, all: &[Snapshot]) -> Option<UdpWindow> {
    let v4 = b.udp?.delta(&a.udp?);
    let v6 = match (a.udp6, b.udp6) {
        (Some(x), Some(y)) => y.delta(&x),
        _ => UdpCounters::default(),
    };
    let mut sockets: BTreeMap<u64, (u32, UdpSocketWindow)> = BTreeMap::new();
    for s in std::iter::once(a).chain(all).chain(std::iter::once(b)) {
        for u in &s.udp_sockets {
            let (first_drops, w) = sockets.entry(u.inode).or_insert_with(|| {
                (
                    u.drops,
                    UdpSocketWindow {
                        addr: u.addr.clone(),
                        port: u.port,
                        ..UdpSocketWindow::default()
                    },
                )
            });
            *first_drops = (*first_drops).min(u.drops);
            w.rcvbuf_bytes = u.rcvbuf;
            w.sndbuf_bytes = u.sndbuf;
            w.receive_queue_max_bytes = w.receive_queue_max_bytes.max(u.receive_queue);
            w.send_queue_max_bytes = w.send_queue_max_bytes.max(u.send_queue);
            w.drops = w.drops.max(u64::from(u.drops.saturating_sub(*first_drops)));
            w.samples += 1;
        }
    }
    Some(UdpWindow {
        v4,
        v6,
        sockets: sockets.into_values().map(|(_, w)| w).collect(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::run::{Listener, ServerProcess};
    use crate::watch::snapshot::ProcSnap;

    fn reader() -> Reader {
        Reader {
            net: String::new(),
            procs: vec![ServerProcess {
                pid: 42,
                ppid: 1,
                comm: "nginx".into(),
                kind: crate::kinds::nginx::KIND,
                role: crate::run::Role::Worker,
                tier: crate::run::Tier::Front,
            }],
            diag: None,
            port: 8080,
            upstream_ports: Default::default(),
            upstream_inodes: Default::default(),
            unix_inodes: BTreeSet::new(),
            missing: BTreeSet::new(),
            warnings: Vec::new(),
            clk_tck: 100.0,
            speeds: BTreeMap::new(),
            conn_seen: BTreeMap::new(),
            conn_chrono: [0; 3],
            conns_at: None,
            udp_inodes: BTreeSet::new(),
        }
    }

    /// The connections are read in the window's first and last snapshots and at most
    /// once per CONNS_EVERY between them (each read walks the kernel's established hash).
    #[test]
    fn reads_the_servers_connections_at_most_once_per_interval() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _server = l.accept().unwrap();
        let mut r = Reader {
            procs: Vec::new(),
            diag: Some(crate::sys::sockdiag::Diag::open().unwrap()),
            port,
            ..reader()
        };
        let sockets = |s: &Snapshot| s.conns.map(|c| c.sockets);
        assert_eq!(sockets(&r.snapshot(true)), Some(1));
        assert_eq!(sockets(&r.snapshot(false)), None, "read again at once");
        assert_eq!(sockets(&r.snapshot(true)), Some(1), "the window's last");
        r.conns_at = r.conns_at.map(|t| t - Duration::from_secs(1));
        assert_eq!(sockets(&r.snapshot(false)), Some(1), "a second later");
    }

    /// A moment of the run: the worker's fds, the accept queue, TIME_WAIT, conntrack.
    fn at(t0: Instant, s: u64, fds: u64, queue: u32, tw: u64, ct: u64) -> Snapshot {
        let mut procs = BTreeMap::new();
        procs.insert(
            42,
            ProcSnap {
                fds: Some(fds),
                fd_limit: Some(1024),
                ..ProcSnap::default()
            },
        );
        Snapshot {
            at: Some(t0 + Duration::from_secs(s)),
            procs,
            listeners: vec![Listener {
                addr: "127.0.0.1:8080".into(),
                port: 8080,
                inode: 1,
                queue,
                backlog: 128,
                v6only: false,
            }],
            sockstat: [("TCP.tw".to_string(), tw)].into_iter().collect(),
            conntrack_count: Some(ct),
            ..Snapshot::default()
        }
    }

    /// Every gauge a rule uses is judged over the samples of the run: the limit reached
    /// mid-run counts though the last sample (after the load drained) is quiet.
    #[test]
    fn gauges_are_judged_over_the_run_not_at_its_end() {
        let r = reader();
        let t0 = Instant::now();
        let before = at(t0, 0, 10, 0, 0, 5);
        let mid = at(t0, 1, 1020, 128, 30_000, 900);
        let after = at(t0, 2, 12, 0, 3, 6);
        let all = vec![before.clone(), mid.clone(), after.clone()];
        let samples = vec![r.sample(t0, &before, &mid), r.sample(t0, &mid, &after)];
        let w = r.window(&before, &after, &samples, &all);
        let p = &w.processes[0];
        assert_eq!((p.fds, p.fds_max), (Some(12), Some(1020)));
        assert_eq!(p.fds_peak(), Some(1020));
        let q = &w.listen_queues[0];
        assert_eq!((q.max_queue, q.samples_full, q.samples), (128, 1, 3));
        assert_eq!(w.time_wait_max, 30_000);
        assert_eq!(w.conntrack.as_ref().unwrap().count_max_seen, 900);
    }
}
