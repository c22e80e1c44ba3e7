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
    let topology = found.topology;
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
        let cur = reader.snapshot(false);
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
