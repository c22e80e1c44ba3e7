//! The machine's part of the run page: CPU per core and on average, TIME_WAIT, the
//! network, the server processes' CPU, the fullest accept queue, and the TCP counters
//! that moved, all over the run from the watch's samples.

use std::fmt::Write;

use super::super::chart::{esc, lines, Series, XAxis};
use crate::run::Run;

/// CPU, TIME_WAIT and accept queues over the run, from the watch's samples.
pub(super) fn machine(o: &mut String, run: &Run) {
    let Some(e) = &run.evidence else { return };
    if e.samples.is_empty() {
        return;
    }
    o.push_str("<h2>The machine</h2>");
    let avg = |f: fn(&crate::run::CpuPct) -> f64| -> Vec<(f64, f64)> {
        e.samples
            .iter()
            .filter(|s| !s.cpus.is_empty())
            .map(|s| {
                (
                    s.t_s,
                    s.cpus.iter().map(f).sum::<f64>() / s.cpus.len() as f64,
                )
            })
            .collect()
    };
    // Busy share per CPU (up to 16 lines; beyond that the average says it).
    let ncpu = e.samples.iter().map(|s| s.cpus.len()).max().unwrap_or(0);
    if (2..=16).contains(&ncpu) {
        const COLORS: [&str; 8] = [
            "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000",
        ];
        let names: Vec<String> = (0..ncpu).map(|i| format!("cpu{i}")).collect();
        let series: Vec<Series> = (0..ncpu)
            .map(|i| Series {
                name: &names[i],
                color: COLORS[i % COLORS.len()],
                points: e
                    .samples
                    .iter()
                    .filter_map(|s| s.cpus.get(i).map(|c| (s.t_s, 100.0 - c.idle)))
                    .collect(),
            })
            .collect();
        o.push_str(&lines(
            "CPU busy, per CPU",
            "%",
            XAxis::Linear("s"),
            &series,
        ));
    }
    o.push_str(&lines(
        "CPU, average of all CPUs",
        "%",
        XAxis::Linear("s"),
        &[
            Series {
                name: "user",
                color: "#0072b2",
                points: avg(|c| c.user),
            },
            Series {
                name: "system",
                color: "#e69f00",
                points: avg(|c| c.system),
            },
            Series {
                name: "softirq",
                color: "#cc79a7",
                points: avg(|c| c.softirq),
            },
        ],
    ));
    let tw: Vec<(f64, f64)> = e
        .samples
        .iter()
        .filter_map(|s| Some((s.t_s, *s.sockstat.get("TCP.tw")? as f64)))
        .collect();
    let queue: Vec<(f64, f64)> = e
        .samples
        .iter()
        .map(|s| {
            (
                s.t_s,
                s.listen_queues.iter().map(|q| q.queue).max().unwrap_or(0) as f64,
            )
        })
        .collect();
    o.push_str(&lines(
        "TIME_WAIT sockets",
        "",
        XAxis::Linear("s"),
        &[Series {
            name: "TIME_WAIT",
            color: "#56b4e9",
            points: tw,
        }],
    ));
    // Network: every interface that moved, Mbit/s each way.
    let mut ifaces: Vec<String> = e
        .window
        .ifaces
        .iter()
        .filter(|i| i.rx_bytes_per_s + i.tx_bytes_per_s > 0.0)
        .map(|i| i.name.clone())
        .collect();
    ifaces.truncate(4);
    let labels: Vec<(String, String)> = ifaces
        .iter()
        .map(|n| (format!("{n} rx"), format!("{n} tx")))
        .collect();
    let mut net = Vec::new();
    for (k, n) in ifaces.iter().enumerate() {
        let rate = |f: fn(&crate::run::IfaceRate) -> f64| -> Vec<(f64, f64)> {
            e.samples
                .iter()
                .filter_map(|s| {
                    let i = s.ifaces.iter().find(|i| &i.name == n)?;
                    Some((s.t_s, f(i) * 8.0 / 1e6))
                })
                .collect()
        };
        net.push(Series {
            name: &labels[k].0,
            color: ["#0072b2", "#009e73", "#cc79a7", "#56b4e9"][k],
            points: rate(|i| i.rx_bytes_per_s),
        });
        net.push(Series {
            name: &labels[k].1,
            color: ["#e69f00", "#d55e00", "#f0e442", "#000"][k],
            points: rate(|i| i.tx_bytes_per_s),
        });
    }
    o.push_str(&lines("network, Mbit/s", "", XAxis::Linear("s"), &net));
    // The front's busiest worker and the busiest upstream process, CPU %.
    let busiest = |front: bool| -> Option<i32> {
        e.window
            .processes
            .iter()
            .filter(|p| p.is_front() == front)
            .max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))
            .map(|p| p.pid)
    };
    let mut procs = Vec::new();
    let proc_labels: Vec<String> = [busiest(true), busiest(false)]
        .iter()
        .flatten()
        .map(|pid| format!("pid {pid}"))
        .collect();
    for (k, pid) in [busiest(true), busiest(false)].iter().flatten().enumerate() {
        procs.push(Series {
            name: &proc_labels[k],
            color: ["#0072b2", "#d55e00"][k],
            points: e
                .samples
                .iter()
                .filter_map(|s| {
                    let p = s.processes.iter().find(|p| p.pid == *pid)?;
                    Some((s.t_s, p.cpu_pct))
                })
                .collect(),
        });
    }
    o.push_str(&lines(
        "server processes' CPU (busiest front worker, busiest upstream)",
        "%",
        XAxis::Linear("s"),
        &procs,
    ));
    o.push_str(&lines(
        "accept queue (fullest listener)",
        "",
        XAxis::Linear("s"),
        &[Series {
            name: "queued",
            color: "#d55e00",
            points: queue,
        }],
    ));
}

/// The TCP counters that moved during the run, per second over the run (the sampler's
/// series), labelled as the terminal labels them; a list of every counter's change below.
pub(super) fn tcp_counters(o: &mut String, run: &Run) {
    let Some(e) = &run.evidence else { return };
    let moved = |opens: bool| -> Vec<&(crate::run::Counter, &str)> {
        super::super::during::TCP_SHOWN
            .iter()
            .filter(|(k, _)| k.key().ends_with("Opens") == opens)
            .filter(|(k, _)| e.window.counters.get(k.key()).is_some_and(|d| *d > 0))
            .filter(|(k, _)| e.samples.iter().any(|s| s.tcp_per_s.contains_key(k.key())))
            .take(8)
            .collect()
    };
    const COLORS: [&str; 8] = [
        "#c0392b", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#0072b2", "#000",
    ];
    let series = |shown: Vec<&(crate::run::Counter, &'static str)>| -> Vec<Series<'static>> {
        shown
            .iter()
            .enumerate()
            .map(|(i, (k, label))| Series {
                name: label,
                color: COLORS[i],
                points: e
                    .samples
                    .iter()
                    .filter_map(|s| Some((s.t_s, *s.tcp_per_s.get(k.key())?)))
                    .collect(),
            })
            .collect()
    };
    // Trouble (drops, retransmits, resets) apart from the opens, which would dwarf it.
    let chart = lines(
        "TCP trouble counters that moved, per second",
        "/s",
        XAxis::Linear("s"),
        &series(moved(false)),
    ) + &lines(
        "TCP connections opened and accepted, per second",
        "/s",
        XAxis::Linear("s"),
        &series(moved(true)),
    );
    o.push_str("<h2>TCP counters</h2>");
    o.push_str(&chart);
    let _ = write!(
        o,
        "<details><summary>every counter that moved over the {:.1} s window: {}</summary><table class=\"sort\"><thead><tr><th>counter</th><th>change</th><th>per second</th></tr></thead><tbody>",
        e.window.duration_s,
        e.window.counters.len()
    );
    for (k, d) in &e.window.counters {
        let r = *d as f64 / e.window.duration_s.max(1e-9);
        let _ = write!(
            o,
            "<tr><td>{}</td><td data-v=\"{d}\">{}</td><td data-v=\"{r:.3}\">{}</td></tr>",
            esc(k),
            esc(&super::super::findings::fmt_num(*d as f64)),
            esc(&crate::units::fmt_count(r)),
        );
    }
    o.push_str("</tbody></table></details>");
}
