//! A channel lost mid-run: the Evidence made of what the remote watch sent before it
//! went (what it found to watch, the samples taken until then), its window rebuilt
//! from those samples and saying what it could not see.
//!
//! The window a watch normally sends is the exact delta of two snapshots around the
//! load; lost with the channel are its kernel counters (drops, overflows, the
//! softnet and qdisc counts), the error logs, the profile and the off-CPU watch. What
//! the samples carry is put back: each CPU's and process's rates as their means over
//! the samples (a rate's mean over equal intervals is its rate over their sum), the
//! interfaces' rates, the series counters (`tcp_per_s`) times the time they cover,
//! the accept queues' highest depth, the highest TIME-WAIT count.

use std::collections::BTreeMap;

use crate::run::{Evidence, ProcRates, QueueMax, Sample, Window};
use crate::watch::Found;

/// The Evidence of a watch whose channel was lost: `samples` on the remote watch's
/// time line (shifted by the caller), `interval_s` apart.
pub fn evidence(found: Found, samples: Vec<Sample>, interval_s: f64, why: String) -> Evidence {
    let window = window(&samples, interval_s);
    let mut warnings = found.warnings;
    warnings.push(why);
    Evidence {
        sample_interval_s: interval_s,
        topology: found.topology,
        host: found.host,
        window,
        samples,
        logs: Vec::new(),
        profile: None,
        offcpu: None,
        warnings,
        sampler_cpu_pct: 0.0,
        source: None,
        started_unix_s: None,
    }
}

/// The window over the time `samples` cover, from their rates and gauges.
pub fn window(samples: &[Sample], interval_s: f64) -> Window {
    let n = samples.len() as f64;
    if samples.is_empty() {
        return Window::default();
    }
    let duration_s = n * interval_s;
    let mut w = Window {
        duration_s,
        ..Window::default()
    };
    let mut cpus = BTreeMap::new();
    let mut ifaces = BTreeMap::new();
    let mut procs: BTreeMap<i32, (ProcRates, f64)> = BTreeMap::new();
    let mut queues: BTreeMap<String, QueueMax> = BTreeMap::new();
    let mut counters: BTreeMap<String, f64> = BTreeMap::new();
    for s in samples {
        for c in &s.cpus {
            let m = cpus.entry(c.cpu).or_insert_with(|| crate::run::CpuPct {
                cpu: c.cpu,
                ..Default::default()
            });
            m.user += c.user / n;
            m.system += c.system / n;
            m.irq += c.irq / n;
            m.softirq += c.softirq / n;
            m.iowait += c.iowait / n;
            m.steal += c.steal / n;
            m.idle += c.idle / n;
        }
        for i in &s.ifaces {
            let m = ifaces
                .entry(i.name.clone())
                .or_insert_with(|| crate::run::IfaceRate {
                    name: i.name.clone(),
                    ..Default::default()
                });
            m.rx_bytes_per_s += i.rx_bytes_per_s / n;
            m.tx_bytes_per_s += i.tx_bytes_per_s / n;
            m.rx_packets_per_s += i.rx_packets_per_s / n;
            m.tx_packets_per_s += i.tx_packets_per_s / n;
            m.drops += i.drops;
            m.util_pct = match (m.util_pct, i.util_pct) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        for p in &s.processes {
            let (m, seen) = procs.entry(p.pid).or_insert_with(|| (p.clone(), 0.0));
            if *seen == 0.0 {
                for f in rates(m) {
                    *f = 0.0;
                }
            }
            *seen += 1.0;
            let mut p = p.clone();
            for (sum, v) in rates(m).into_iter().zip(rates(&mut p)) {
                *sum += *v;
            }
            // Gauges: the last seen.
            m.state = p.state.clone();
            m.last_cpu = p.last_cpu;
            m.threads = p.threads;
            m.rss_kb = p.rss_kb;
            m.fds = p.fds;
        }
        for q in &s.listen_queues {
            let m = queues.entry(q.addr.clone()).or_insert_with(|| QueueMax {
                addr: q.addr.clone(),
                ..QueueMax::default()
            });
            m.max_queue = m.max_queue.max(q.queue);
            m.backlog = q.backlog;
            m.samples += 1;
            m.samples_full += u32::from(q.backlog > 0 && q.queue >= q.backlog);
            m.samples_queued += u32::from(q.queue > 0);
        }
        for (k, v) in &s.tcp_per_s {
            *counters.entry(k.clone()).or_default() += v * interval_s;
        }
        w.time_wait_max = w
            .time_wait_max
            .max(s.sockstat.get("TCP.tw").copied().unwrap_or(0));
    }
    w.cpus = cpus.into_values().collect();
    w.ifaces = ifaces.into_values().collect();
    w.processes = procs
        .into_values()
        .map(|(mut p, seen)| {
            for f in rates(&mut p) {
                *f /= seen;
            }
            p
        })
        .collect();
    w.listen_queues = queues.into_values().collect();
    w.counters = counters
        .into_iter()
        .map(|(k, v)| (k, v.round() as u64))
        .filter(|(_, v)| *v > 0)
        .collect();
    let last = samples.last().expect("not empty");
    w.sockstat_end = last.sockstat.clone();
    w
}

/// A process's per-second rates (averaged over samples; its gauges are not).
fn rates(p: &mut ProcRates) -> Vec<&mut f64> {
    let mut v = vec![
        &mut p.cpu_pct,
        &mut p.user_pct,
        &mut p.system_pct,
        &mut p.voluntary_ctxt_switches_per_s,
        &mut p.nonvoluntary_ctxt_switches_per_s,
        &mut p.minor_faults_per_s,
    ];
    v.extend(
        [
            &mut p.busiest_thread_pct,
            &mut p.run_delay_ms_per_s,
            &mut p.reads_per_s,
            &mut p.bytes_per_read,
            &mut p.writes_per_s,
            &mut p.bytes_per_write,
        ]
        .into_iter()
        .flatten(),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{CpuPct, QueueGauge};

    fn sample(t_s: f64, worker_cpu: f64, queue: u32) -> Sample {
        Sample {
            t_s,
            cpus: vec![CpuPct {
                cpu: 0,
                user: worker_cpu,
                idle: 100.0 - worker_cpu,
                ..Default::default()
            }],
            processes: vec![ProcRates {
                pid: 7,
                cpu_pct: worker_cpu,
                run_delay_ms_per_s: Some(10.0),
                rss_kb: t_s as u64,
                ..Default::default()
            }],
            listen_queues: vec![QueueGauge {
                addr: "10.0.0.2:80".into(),
                queue,
                backlog: 511,
            }],
            tcp_per_s: [("TcpExt.ListenOverflows".to_string(), 50.0)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_window_of_samples_is_their_means_and_highest_gauges() {
        let w = window(&[sample(1.0, 90.0, 3), sample(2.0, 100.0, 511)], 1.0);
        assert_eq!(w.duration_s, 2.0);
        assert!((w.cpus[0].user - 95.0).abs() < 1e-9, "{:?}", w.cpus);
        let p = &w.processes[0];
        assert!((p.cpu_pct - 95.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p.run_delay_ms_per_s, Some(10.0));
        assert_eq!(p.rss_kb, 2, "gauges are the last seen");
        let q = &w.listen_queues[0];
        assert_eq!((q.max_queue, q.samples_full, q.samples), (511, 1, 2));
        assert_eq!(w.counters["TcpExt.ListenOverflows"], 100);
        assert_eq!(window(&[], 1.0).duration_s, 0.0);
    }
}
