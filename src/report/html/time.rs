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
