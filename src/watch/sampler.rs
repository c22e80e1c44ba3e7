//! The sampler thread: joins the server's network namespace, discovers the target,
//! takes the `before` snapshot, then a sample every interval until told to stop, then the
//! `after` snapshot and the window.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::run::{Evidence, Profile, Role, Sample, Tier, Topology};
use crate::sys::sockdiag::{self, Diag};
use crate::sys::thread_cpu::ThreadCpuSample;

use super::host::link_speeds;
use super::snapshot::{all_cpu_ticks, qdiscs, ProcSnap, Reader, Snapshot};
use super::{discover, logs, offcpu, profile, Found, WatchSpec, MAX_SAMPLES};
use crate::sys::cgroup::quotas_of;

/// The sampler thread: set-up, then a sample every interval until told to stop.
pub(super) fn sampler(
    spec: WatchSpec,
    stop: mpsc::Receiver<()>,
    ready: mpsc::Sender<Found>,
    live: Option<mpsc::Sender<Sample>>,
) -> Evidence {
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
        upstream_ports: found
            .topology
            .upstream_listeners
            .iter()
            .map(|l| l.port)
            .collect(),
        upstream_inodes: found
            .topology
            .upstream_listeners
            .iter()
            .map(|l| l.inode)
            .collect(),
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
        conn_seen: BTreeMap::new(),
        conn_chrono: [0; 3],
        conns_at: None,
        udp_inodes: BTreeSet::new(),
    };
    let mut host = reader.host_facts();
    let mut topology = found.topology;
    let interval = spec.interval;
    // Where each server's error log ends now: what is appended from here on is the
    // window's.
    let tails = logs::find(&topology.processes, topology.config.as_ref());
    let profiler = spec.profile_hz.and_then(|hz| {
        let pids: Vec<i32> = topology.processes.iter().map(|p| p.pid).collect();
        let p = profile::Profiler::start(&pids, hz)
            .map_err(|e| reader.warnings.push(e))
            .ok()?;
        reader.warnings.extend(p.note.clone());
        Some(p)
    });
    // Where the server's threads slept: their context switches wherever the CPU is
    // profiled, else their states sampled from /proc.
    let pids: Vec<i32> = topology.processes.iter().map(|p| p.pid).collect();
    let offcpu = if spec.offcpu {
        offcpu::Watch::start(&pids)
            .map_err(|e| reader.warnings.push(e))
            .ok()
            .map(|(w, note)| {
                reader.warnings.extend(note);
                w
            })
    } else if spec.sampled && !pids.is_empty() {
        offcpu::Watch::sampled(&pids)
            .map_err(|e| {
                reader.warnings.push(format!(
                    "where the server's threads slept is not watched: {e}"
                ))
            })
            .ok()
    } else {
        None
    };
    let server_pids: Vec<i32> = topology.processes.iter().map(|p| p.pid).collect();
    // The upstreams a front connects to per request are found during the load (see
    // `reached::add_reached`): their CPU is counted from the start, from every
    // process's ticks now.
    let mut rediscover = Rediscover::new(&topology);
    let mut before = reader.snapshot(true);
    before.qdiscs = qdiscs();
    before.quotas = quotas_of(&server_pids);
    before.all_ticks = all_cpu_ticks();
    host.qdisc_rate_bytes_per_s = before
        .qdiscs
        .iter()
        .map(|(k, v)| (k.clone(), v.0))
        .collect();
    // Set-up (discovery) is a one-time cost; this measures the cost of sampling.
    let cpu_at_start = ThreadCpuSample::now();
    let _ = ready.send(Found {
        topology: topology.clone(),
        host: host.clone(),
        warnings: reader.warnings.clone(),
    });
    let start = before.at.unwrap_or_else(Instant::now);
    // The watch's start on the clock the kernel stamps context switches with.
    let origin_ns = offcpu::monotonic_ns().saturating_sub(start.elapsed().as_nanos() as u64);
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
        let found_now = rediscover.poll(&mut reader, &mut topology, spec.target);
        let cur = reader.snapshot(false);
        for pid in found_now {
            if let Some(p) = cur.procs.get(&pid) {
                let mut p = p.clone();
                if let Some(t) = rediscover.ticks_at_start.get(&pid) {
                    (p.stat.utime, p.stat.stime) = *t;
                }
                before.procs.insert(pid, p);
            }
        }
        if samples.len() < MAX_SAMPLES {
            let sample = reader.sample(start, &prev, &cur);
            if let Some(live) = &live {
                let _ = live.send(sample.clone());
            }
            samples.push(sample);
            // Keep only what the window needs from each snapshot.
            snaps.push(Snapshot {
                at: cur.at,
                conntrack_count: cur.conntrack_count,
                listeners: cur.listeners.clone(),
                conns: cur.conns,
                udp_sockets: cur.udp_sockets.clone(),
                // Gauges the window judges over the run: open fds per process.
                procs: cur
                    .procs
                    .iter()
                    .map(|(pid, p)| {
                        let fds = ProcSnap {
                            fds: p.fds,
                            ..ProcSnap::default()
                        };
                        (*pid, fds)
                    })
                    .collect(),
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
    let mut after = reader.snapshot(true);
    after.qdiscs = qdiscs();
    after.quotas = quotas_of(&server_pids);
    after.all_ticks = all_cpu_ticks();
    // The partial last interval, so even a short run has a sample.
    samples.push(reader.sample(start, &prev, &after));
    snaps.push(after.clone());
    let profile = profiler.map(|p| {
        let mut p = p.finish();
        p.top = busiest_front_worker(&p, &topology).map(|pid| p.top_of(pid, 15));
        p
    });
    let offcpu = offcpu.map(|w| w.finish(origin_ns, start));
    let window = reader.window(&before, &after, &samples, &snaps);
    let logs: Vec<_> = tails.iter().map(logs::Tail::finish).collect();
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
        logs,
        profile,
        offcpu,
        warnings: reader.warnings,
        source: None,
        started_unix_s: None,
    }
}

/// Finding, during the load, the upstreams the front connects to (a front whose
/// upstream was named by its configuration, or found connected at the start, is not
/// searched again).
struct Rediscover {
    /// When to look next; `None`: no more looking.
    next: Option<Instant>,
    /// Searches left.
    left: u32,
    /// Every process's user and system ticks when the watch began.
    ticks_at_start: BTreeMap<i32, (u64, u64)>,
}

/// How often the front's connections are searched for upstreams during the load, and
/// how many times at most: each search dumps the established TCP sockets (the kernel's
/// whole hash) and every connected unix socket, and an upstream the front connects to
/// per request is connected in the load's first second.
const REDISCOVER_EVERY: Duration = Duration::from_millis(1000);
const REDISCOVER_TIMES: u32 = 8;

impl Rediscover {
    fn new(topology: &Topology) -> Rediscover {
        let searching = topology.processes.iter().any(|p| p.tier == Tier::Front)
            && !topology.processes.iter().any(|p| p.tier == Tier::Upstream)
            && !topology.listeners.is_empty();
        Rediscover {
            next: searching.then(Instant::now),
            left: REDISCOVER_TIMES,
            ticks_at_start: if searching {
                crate::sys::procfs::all_pid_stats()
                    .into_iter()
                    .map(|(pid, s)| (pid, (s.utime, s.stime)))
                    .collect()
            } else {
                BTreeMap::new()
            },
        }
    }

    /// Searches when due; the pids of the processes found (now watched too).
    fn poll(
        &mut self,
        reader: &mut Reader,
        topology: &mut Topology,
        target: std::net::SocketAddr,
    ) -> Vec<i32> {
        let Some(at) = self.next else {
            return Vec::new();
        };
        let now = Instant::now();
        if now < at {
            return Vec::new();
        }
        self.left = self.left.saturating_sub(1);
        self.next = (self.left > 0).then(|| now + REDISCOVER_EVERY);
        let Some(d) = reader.diag.as_mut() else {
            self.next = None;
            return Vec::new();
        };
        let new = super::reached::add_reached(topology, d, target.port());
        if new.is_empty() {
            return Vec::new();
        }
        self.next = None;
        reader.procs.extend(new.iter().cloned());
        reader.upstream_ports = topology.upstream_listeners.iter().map(|l| l.port).collect();
        reader.upstream_inodes = topology
            .upstream_listeners
            .iter()
            .map(|l| l.inode)
            .collect();
        reader.unix_inodes = topology.unix_listeners.iter().map(|u| u.inode).collect();
        discover::read_upstream_config(topology, &mut reader.warnings);
        topology.summary = discover::summarize(topology, target);
        reader.warnings.push(format!(
            "upstream found from the front's connections during the load: {}",
            topology.summary
        ));
        new.iter().map(|p| p.pid).collect()
    }
}

/// The front worker with the most samples (any process when no worker was sampled).
fn busiest_front_worker(p: &Profile, topology: &Topology) -> Option<i32> {
    let workers: Vec<i32> = topology
        .processes
        .iter()
        .filter(|s| s.tier != Tier::Upstream && s.role != Role::Master)
        .map(|s| s.pid)
        .collect();
    let all: Vec<i32> = topology.processes.iter().map(|s| s.pid).collect();
    p.busiest(&workers).or_else(|| p.busiest(&all))
}
