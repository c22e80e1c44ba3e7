//! The "During the run" block: what the machine did while the load ran, readable at a
//! glance. Only what moved is shown; the JSON has everything.

use crate::run::Counter;
use std::fmt::Write as _;

use crate::run::Evidence;
use crate::units::{fmt_bytes, fmt_count};

/// TCP counters worth a line when they moved, in the order a person checks them.
pub(super) const TCP_SHOWN: &[(Counter, &str)] = &[
    (Counter::ListenOverflows, "ListenOverflows"),
    (Counter::ListenDrops, "ListenDrops"),
    (Counter::ReqQFullDrop, "SYN queue drops"),
    (Counter::SyncookiesSent, "SYN cookies"),
    (Counter::RetransSegs, "retransmits"),
    (Counter::SynRetrans, "SYN retransmits"),
    (Counter::Timeouts, "RTO timeouts"),
    (Counter::AttemptFails, "failed connects"),
    (Counter::EstabResets, "resets"),
    (Counter::OutRsts, "RSTs sent"),
    (Counter::AbortOnData, "aborts on data"),
    (Counter::TimeWaitOverflow, "TIME_WAIT overflow"),
    (Counter::PassiveOpens, "accepted"),
    (Counter::ActiveOpens, "opened"),
];

/// `own_iowait`: the CPUs on which loadlens's own io_uring waits counted as iowait
/// (`LoadResults::iowait_cpus`), marked when the evidence is this machine's.
pub fn render(e: &Evidence, own_iowait: &[u32]) -> String {
    let mut o = String::new();
    let w = &e.window;
    let _ = writeln!(
        o,
        "During the run ({} samples every {}; {})",
        e.samples.len(),
        crate::units::fmt_duration(std::time::Duration::from_secs_f64(e.sample_interval_s)),
        e.topology.summary
    );
    if let Some(s) = e.source.as_ref().filter(|s| s.transport == "attach") {
        let _ = writeln!(
            o,
            "  from a watch run alone on {} ({}), placed by wall clock (it started {:+.1}s from the load; the clocks taken to agree)",
            s.hostname, s.destination, s.shift_s
        );
    } else if let Some(s) = &e.source {
        // Its CPU comes with the stop's answer: unknown when the channel was lost.
        let cpu = match s.lost_at_s {
            Some(_) => "its CPU unknown".to_string(),
            None => format!("the remote watch used {:.1}% of a core", s.remote_cpu_pct),
        };
        let _ = writeln!(
            o,
            "  watched over {} on {} ({}): clock offset {:+.1}ms ± {:.1}ms; {cpu}, sent {}/s",
            s.transport,
            s.hostname,
            s.destination,
            s.clock_offset_s * 1e3,
            s.clock_uncertainty_s * 1e3,
            fmt_bytes(s.bytes_per_s)
        );
        if let Some(at) = s.lost_at_s {
            let _ = writeln!(
                o,
                "  the channel was lost {at:.1}s into the load: below are the samples until then; the kernel counters over the window, the error logs and the profile were not seen"
            );
        }
    }
    if !w.cpus.is_empty() {
        cpu_table(&mut o, e, own_iowait);
    }
    let busy: Vec<_> = w
        .ifaces
        .iter()
        .filter(|i| i.rx_bytes_per_s + i.tx_bytes_per_s >= 1024.0 || i.drops > 0)
        .collect();
    for i in busy {
        let _ = writeln!(
            o,
            "  NIC {:<8} rx {}/s tx {}/s, {} pkt/s{}{}",
            i.name,
            fmt_bytes(i.rx_bytes_per_s),
            fmt_bytes(i.tx_bytes_per_s),
            fmt_count(i.rx_packets_per_s + i.tx_packets_per_s),
            i.util_pct
                .map(|u| format!(", {u:.0}% of link"))
                .unwrap_or_default(),
            if i.drops > 0 {
                format!(", {} drops", i.drops)
            } else {
                String::new()
            }
        );
    }
    let tcp: Vec<String> = TCP_SHOWN
        .iter()
        .filter_map(|(k, label)| {
            let d = *w.counters.get(k.key())?;
            Some(format!(
                "{label} +{d} ({}/s)",
                fmt_count(d as f64 / w.duration_s.max(1e-9))
            ))
        })
        .collect();
    let tw = w.sockstat_end.get("TCP.tw").copied().unwrap_or(0);
    let _ = writeln!(
        o,
        "  TCP       {}{}TIME_WAIT {tw} now, {} max",
        tcp.join(", "),
        if tcp.is_empty() { "" } else { "; " },
        w.time_wait_max
    );
    if let Some(u) = w.udp.as_ref() {
        udp_line(&mut o, u, w.duration_s);
    }
    if w.softnet_dropped + w.softnet_time_squeeze > 0 {
        let _ = writeln!(
            o,
            "  softnet   {} dropped (netdev_max_backlog), {} squeezed (netdev_budget)",
            w.softnet_dropped, w.softnet_time_squeeze
        );
    }
    if let Some(c) = &w.conntrack {
        let _ = writeln!(
            o,
            "  conntrack {}/{} max seen ({:.0}%){}",
            c.count_max_seen,
            c.max,
            c.count_max_seen as f64 * 100.0 / c.max.max(1) as f64,
            if c.drop + c.early_drop + c.insert_failed > 0 {
                format!(
                    ", {} dropped, {} early-dropped, {} insert failed",
                    c.drop, c.early_drop, c.insert_failed
                )
            } else {
                String::new()
            }
        );
    }
    for q in &w.listen_queues {
        let _ = writeln!(
            o,
            "  listen    {} accept queue max {}/{}{}",
            q.addr,
            q.max_queue,
            q.backlog,
            if q.samples_full > 0 {
                format!(", full in {} of {} samples", q.samples_full, q.samples)
            } else {
                String::new()
            }
        );
    }
    if !w.processes.is_empty() {
        let _ = writeln!(
            o,
            "  {:<22}{:>7}{:>7}{:>7}{:>11}{:>9}{:>9}{:>9}{:>9}",
            "process", "pid", "CPU%", "sys%", "wait ms/s", "csw/s", "ics/s", "B/read", "B/write"
        );
        for p in &w.processes {
            let opt = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or("-".into());
            let _ = writeln!(
                o,
                "  {:<22}{:>7}{:>7.1}{:>7.1}{:>11}{:>9}{:>9}{:>9}{:>9}",
                format!("{} {}", p.comm, p.role),
                p.pid,
                p.cpu_pct,
                p.system_pct,
                p.run_delay_ms_per_s
                    .map(|x| format!("{x:.1}"))
                    .unwrap_or("-".into()),
                fmt_count(p.voluntary_ctxt_switches_per_s),
                fmt_count(p.nonvoluntary_ctxt_switches_per_s),
                opt(p.bytes_per_read),
                opt(p.bytes_per_write),
            );
        }
    }
    for l in &e.logs {
        let known: u64 = l.classes.iter().map(|c| c.count).sum();
        if known + l.other_lines > 0 {
            let classes: Vec<String> = l
                .classes
                .iter()
                .map(|c| format!("{} ×{}", c.class, c.count))
                .chain((l.other_lines > 0).then(|| format!("other ×{}", l.other_lines)))
                .collect();
            let _ = writeln!(
                o,
                "  log       {} ({}): {}",
                l.path,
                l.server,
                classes.join(", ")
            );
            let example = l
                .classes
                .first()
                .map(|c| c.example.as_str())
                .or(l.other_example.as_deref());
            if let Some(ex) = example {
                let ex: String = ex.chars().take(110).collect();
                let _ = writeln!(o, "              {ex}");
            }
        }
        if let Some(n) = &l.note {
            let _ = writeln!(o, "  note: {n}");
        }
    }
    for warn in &e.warnings {
        let _ = writeln!(o, "  note: {warn}");
    }
    o
}

/// Each CPU's shares, named as `mpstat` names them, so a row sums to 100%: time blocked
/// on disk (%iowait) and taken by the hypervisor (%steal) are where a CPU's time went
/// too. Where loadlens's own io_uring waits counted as iowait (a kernel without
/// `IORING_FEAT_NO_IOWAIT`) and the CPUs are this machine's, those rows are marked.
fn cpu_table(o: &mut String, e: &Evidence, own_iowait: &[u32]) {
    // The watch on another machine saw other CPUs than the client's.
    let local = e.source.is_none();
    let own = |cpu: u32| local && own_iowait.contains(&cpu);
    let _ = writeln!(
        o,
        "  CPU       %usr    %sys   %soft    %irq %iowait  %steal   %idle"
    );
    for c in &e.window.cpus {
        let _ = writeln!(
            o,
            "    cpu{:<3}{:>8.1}{:>8.1}{:>8.1}{:>8.1}{:>8.1}{:>8.1}{:>8.1}{}",
            c.cpu,
            c.user,
            c.system,
            c.softirq,
            c.irq,
            c.iowait,
            c.steal,
            c.idle,
            if own(c.cpu) { " *" } else { "" }
        );
    }
    if e.window.cpus.iter().any(|c| own(c.cpu)) {
        let _ = writeln!(
            o,
            "    * %iowait includes loadlens's own io_uring waits (this kernel has no IORING_FEAT_NO_IOWAIT, Linux < 6.15): not a disk; --io epoll leaves it out"
        );
    }
}

/// UDP, when datagrams moved or the server has UDP sockets: the counters, then each of
/// the server's sockets with its buffer, highest queue and drops (`ss -uamn`'s skmem).
fn udp_line(o: &mut String, u: &crate::run::UdpWindow, dt: f64) {
    let t = u.total();
    if t.in_datagrams + t.out_datagrams + t.in_errors == 0 && u.sockets.is_empty() {
        return;
    }
    let rate = |d: u64| fmt_count(d as f64 / dt.max(1e-9));
    let mut parts = vec![
        format!("in +{} ({}/s)", t.in_datagrams, rate(t.in_datagrams)),
        format!("out +{} ({}/s)", t.out_datagrams, rate(t.out_datagrams)),
    ];
    for (label, d) in [
        ("InErrors", t.in_errors),
        ("RcvbufErrors", t.rcvbuf_errors),
        ("SndbufErrors", t.sndbuf_errors),
    ] {
        if d > 0 {
            parts.push(format!("{label} +{d} ({}/s)", rate(d)));
        }
    }
    let _ = writeln!(o, "  UDP       {}", parts.join(", "));
    for s in &u.sockets {
        let _ = writeln!(
            o,
            "    socket {} receive buffer {} (queue max {}), send buffer {}, drops +{}",
            s.addr,
            fmt_bytes(s.rcvbuf_bytes as f64),
            fmt_bytes(s.receive_queue_max_bytes as f64),
            fmt_bytes(s.sndbuf_bytes as f64),
            s.drops
        );
    }
}
