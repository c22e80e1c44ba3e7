//! "Where the requests' time went": the request path's tiers (client, network, front,
//! upstreams) with each one's time, share of the latency, requests in it and waiting
//! in front of it, busy workers and use; the bottleneck tier; the probes that ran.

use std::fmt::Write as _;

use crate::run::{PathTier, Run};

/// The terminal block, or "" when the Run has no path.
pub fn render(run: &Run) -> String {
    let Some(p) = &run.path else {
        return probes_line(run);
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Where the requests' time went (mean latency {}, Little's law per tier)",
        ms(run.results.latency.mean_us / 1e3)
    );
    let _ = writeln!(
        o,
        "  {:<9} {:<28} {:>9} {:>6} {:>7} {:>8} {:>12} {:>5}",
        "tier", "", "time", "share", "in it", "waiting", "workers busy", "used"
    );
    for t in &p.tiers {
        let _ = writeln!(
            o,
            "  {:<9} {:<28} {:>9} {:>6} {:>7.1} {:>8} {:>12} {:>5}",
            t.role,
            clip(&t.name, 28),
            ms(t.time_ms),
            if t.role == "client" {
                "-".to_string()
            } else {
                format!("{:.0}%", t.share_pct)
            },
            t.in_flight,
            if t.role == "client" || t.role == "network" {
                "-".to_string()
            } else {
                format!("{:.1}", t.waiting)
            },
            workers(t),
            t.utilisation_pct
                .map_or("-".to_string(), |u| format!("{u:.0}%")),
        );
    }
    match &p.bottleneck {
        Some(b) => {
            let _ = writeln!(o, "  bottleneck: {b} — {}", p.why);
        }
        None => {
            let _ = writeln!(o, "  no tier used up and no queue in front of one");
        }
    }
    o.push_str(&probes_line(run));
    o
}

/// "  probes: 1 connection 50.3 ms each, 19.8/s; 160 connections 2.01 s each, 79.6/s".
fn probes_line(run: &Run) -> String {
    if run.probes.is_empty() {
        return String::new();
    }
    let each: Vec<String> = run
        .probes
        .iter()
        .map(|p| {
            format!(
                "{} connection{} {:.1}s: {} each, {:.0}/s",
                p.connections,
                if p.connections == 1 { "" } else { "s" },
                p.duration_s,
                ms(p.mean_ms),
                p.requests_per_s
            )
        })
        .collect();
    format!("  probes (after the load): {}\n", each.join("; "))
}

fn workers(t: &PathTier) -> String {
    match (t.workers_busy, t.workers) {
        (Some(b), Some(n)) => format!("{b:.1} / {n}"),
        (Some(b), None) => format!("{b:.1}"),
        (None, Some(n)) => format!("? / {n}"),
        (None, None) => "-".into(),
    }
}

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2}s", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.1}ms")
    } else {
        format!("{v:.2}ms")
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(n - 1).collect();
        c.push('…');
        c
    }
}

/// The HTML section: the same table, each tier's share as a bar.
pub fn html(o: &mut String, run: &Run) {
    let Some(p) = &run.path else { return };
    let esc = super::chart::esc;
    let _ = write!(
        o,
        "<h2>Where the requests' time went</h2><p>Mean latency {}; Little's law per tier (requests in a tier ÷ rate = time there).</p><table><tr><th>tier</th><th></th><th>time</th><th>share of the latency</th><th>in it</th><th>waiting in front</th><th>workers busy</th><th>used</th></tr>",
        ms(run.results.latency.mean_us / 1e3)
    );
    for t in &p.tiers {
        let _ = write!(
            o,
            "<tr><td>{}</td><td title=\"{}\">{}</td><td>{}</td><td><span style=\"display:inline-block;background:#c55;height:.8em;width:{:.0}px\"></span> {:.0}%</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
            esc(&t.role),
            esc(&t.basis),
            esc(&t.name),
            ms(t.time_ms),
            2.0 * t.share_pct,
            t.share_pct,
            t.in_flight,
            t.waiting,
            esc(&workers(t)),
            t.utilisation_pct
                .map_or("-".to_string(), |u| format!("{u:.0}%")),
        );
    }
    o.push_str("</table>");
    if let Some(b) = &p.bottleneck {
        let _ = write!(o, "<p><b>Bottleneck: {}</b> — {}</p>", esc(b), esc(&p.why));
    }
    let line = probes_line(run);
    if !line.is_empty() {
        let _ = write!(o, "<p>{}</p>", esc(line.trim()));
    }
}
