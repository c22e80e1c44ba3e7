//! "Where the server's time went" on the run page: each process's time on a CPU,
//! waiting for one, blocked, waiting for work; what it blocked in; the long waits on the
//! run's clock; and the off-CPU flame graph (the stacks it blocked in, by time).

use std::fmt::Write;

use super::super::chart::esc;
use super::super::time::{rows, source, COLUMNS};
use crate::run::Run;

/// Blocking calls and waits listed.
const CALLS: usize = 10;
const WAITS: usize = 20;

pub(super) fn time(o: &mut String, run: &Run) {
    let Some(e) = &run.evidence else { return };
    let Some(off) = &e.offcpu else { return };
    let _ = write!(
        o,
        "<h2>Where the server's time went</h2><p>{}.</p><table class=\"sort\"><thead><tr><th>process</th>",
        esc(&source(off))
    );
    for c in COLUMNS {
        let _ = write!(o, "<th>{c}</th>");
    }
    o.push_str("</tr></thead><tbody>");
    for (who, shares) in rows(e) {
        let _ = write!(o, "<tr><td>{}</td>", esc(&who));
        for s in shares {
            let _ = write!(o, "<td>{s:.1}%</td>");
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>");
    let pids: Vec<i32> = e.window.processes.iter().map(|p| p.pid).collect();
    let calls: Vec<_> = off.blocking_waits(&pids).take(CALLS).collect();
    if !calls.is_empty() {
        o.push_str("<h3>Blocked in</h3><table class=\"sort\"><thead><tr><th>ms</th><th>times</th><th>longest ms</th><th>pid</th><th>call</th></tr></thead><tbody>");
        for w in calls {
            let _ = write!(
                o,
                "<tr><td>{:.0}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td></tr>",
                w.total_ms,
                w.count,
                w.max_ms,
                w.pid,
                esc(&w.describe())
            );
        }
        o.push_str("</tbody></table>");
    }
    if !off.stalls.is_empty() {
        let _ = write!(
            o,
            "<h3>Waits ≥ {:.0} ms ({} in all; the samples' clock)</h3><table class=\"sort\"><thead><tr><th>at s</th><th>ms</th><th>pid</th><th>why</th><th>call</th><th>file</th></tr></thead><tbody>",
            crate::run::STALL_MS,
            off.stalls.len()
        );
        for s in off.stalls.iter().take(WAITS) {
            let _ = write!(
                o,
                "<tr><td>{:.2}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                s.t_s,
                s.ms,
                s.pid,
                s.class.map_or("", |c| c.label()),
                esc(s.syscall.as_deref().unwrap_or("")),
                esc(s.file.as_deref().unwrap_or(""))
            );
        }
        o.push_str("</tbody></table>");
    }
    if let Ok(svg) = super::super::flamegraph::offcpu_inline_svg(run) {
        use base64::Engine;
        let _ = write!(
            o,
            "<p><img alt=\"off-CPU flame graph\" style=\"width:100%\" src=\"data:image/svg+xml;base64,{}\"></p>",
            base64::engine::general_purpose::STANDARD.encode(svg)
        );
    }
}

/// Stall marks drawn on the 100 ms charts, and how many of them carry a label.
const MARKS: usize = 40;
const LABELLED: usize = 4;

/// The load every 100 ms: responses and latency per slice, with the server's long waits
/// (`OffStall`s, which share the load's clock: the watch starts as the load does) drawn
/// across them — a stall lines up with the slices it emptied and the latency after it.
pub(super) fn slices(o: &mut String, run: &Run) {
    use super::super::chart::{lines_marked, Mark, Series, XAxis};
    let s = &run.results.slices;
    if s.is_empty() {
        return;
    }
    let stalls: Vec<&crate::run::OffStall> = run
        .evidence
        .as_ref()
        .and_then(|e| e.offcpu.as_ref())
        .map(|off| {
            let mut v: Vec<_> = off.stalls.iter().collect();
            v.sort_by(|a, b| b.ms.total_cmp(&a.ms));
            v.truncate(MARKS);
            v
        })
        .unwrap_or_default();
    // The longest stalls are labelled, each far enough from the last to be read.
    let span = s.last().map_or(1.0, |x| x.t_ms as f64 / 1000.0).max(0.1);
    let mut labelled: Vec<f64> = Vec::new();
    let labels: Vec<String> = stalls
        .iter()
        .map(|st| {
            let apart = labelled.iter().all(|t| (t - st.t_s).abs() > span / 6.0);
            if apart && labelled.len() < LABELLED {
                labelled.push(st.t_s);
                format!(
                    "{} {:.0} ms",
                    st.syscall.as_deref().unwrap_or("wait"),
                    st.ms
                )
            } else {
                String::new()
            }
        })
        .collect();
    let at = |x: &crate::run::Slice| x.t_ms as f64 / 1000.0;
    // Marks inside the chart's x range (that of its points).
    let marks_to = |end: f64| -> Vec<Mark> {
        stalls
            .iter()
            .zip(&labels)
            .filter(|(st, _)| st.t_s <= end)
            .map(|(st, l)| Mark::X(st.t_s, l))
            .collect()
    };
    o.push_str("<h2>Every 100 ms</h2>");
    if !stalls.is_empty() {
        let _ = write!(
            o,
            "<p>Dashed lines: the server's threads blocked ≥ {:.0} ms (the {} longest).</p>",
            crate::run::STALL_MS,
            stalls.len()
        );
    }
    o.push_str(&lines_marked(
        "responses per 100 ms",
        "",
        XAxis::Linear("s"),
        &[Series {
            name: "responses",
            color: "#0072b2",
            points: s.iter().map(|x| (at(x), x.responses as f64)).collect(),
        }],
        &marks_to(span),
    ));
    let ms = |f: fn(&crate::run::Slice) -> u64| -> Vec<(f64, f64)> {
        s.iter()
            .filter(|x| x.responses > 0)
            .map(|x| (at(x), f(x) as f64 / 1000.0))
            .collect()
    };
    let answered = s.iter().rev().find(|x| x.responses > 0).map_or(0.0, at);
    o.push_str(&lines_marked(
        "latency every 100 ms",
        "ms",
        XAxis::Linear("s"),
        &super::percentile_series([ms(|x| x.p50_us), ms(|x| x.p99_us), ms(|x| x.max_us)]),
        &marks_to(answered),
    ));
}
