//! The history page (`loadlens history NAME --html FILE`): a test's stored Runs as
//! trends — requests/s; p50, p99 and max; the server's CPU per request — with each
//! change point drawn across its chart as a link to its entry below, which names the two
//! Runs it separates (position, id, time, revision) and the `loadlens compare` line for
//! them; then every Run in a table. Self-contained like the Run's page: inline CSS and
//! SVG, the same small sorting script, nothing fetched.

use std::fmt::Write;

use super::super::chart::{esc, lines_marked, Mark, Series, XAxis};
use super::super::history::{compare_command, describe, headline, short, show, time, Gate};
use super::super::View;
use super::{SCRIPT, STYLE};
use crate::history::{Analysis, Metric};
use crate::units::{fmt_count, fmt_us};

/// The HTML view of a history.
pub struct HistoryHtml(pub Gate);

impl View<Analysis> for HistoryHtml {
    fn render(&self, an: &Analysis) -> Vec<u8> {
        page(an, &self.0).into_bytes()
    }
}

/// One chart: its title, y unit, the scale from the stored unit, the metrics drawn.
struct Chart {
    title: &'static str,
    unit: &'static str,
    scale: f64,
    lines: &'static [(Metric, &'static str)],
}

const CHARTS: [Chart; 3] = [
    Chart {
        title: "requests/s, Run by Run",
        unit: "",
        scale: 1.0,
        lines: &[(Metric::RequestsPerS, "#0072b2")],
    },
    Chart {
        title: "latency, Run by Run",
        unit: "ms",
        scale: 1e-3,
        lines: &[
            (Metric::P50Us, "#009e73"),
            (Metric::P99Us, "#e69f00"),
            (Metric::MaxUs, "#d55e00"),
        ],
    },
    Chart {
        title: "the server's CPU per request, Run by Run",
        unit: "µs",
        scale: 1.0,
        lines: &[(Metric::ServerCpuUsPerRequest, "#cc79a7")],
    },
];

/// The whole page.
pub fn page(an: &Analysis, g: &Gate) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>loadlens history: {}</title><style>{STYLE}\n.cp:target{{background:#fff3cd}}code{{font-size:12px}}</style></head><body>",
        esc(&an.name)
    );
    let _ = write!(
        o,
        "<h1>{}</h1><div class=\"sub\">{} Runs",
        esc(&an.name),
        an.runs.len()
    );
    if let (Some(m), Some(e)) = (&an.machine, an.runs.last()) {
        let f = &e.machine_facts;
        let _ = write!(
            o,
            " · machine {} ({}, {} cores, {})",
            esc(m),
            esc(&f.cpu_model),
            f.cores,
            esc(&f.kernel)
        );
        if an.other_machines > 0 {
            let _ = write!(
                o,
                " · {} Runs of other machines left out",
                an.other_machines
            );
        }
    }
    let _ = write!(o, " · {}</div>", esc(&g.db));
    verdict(&mut o, an, g);
    for c in &CHARTS {
        chart(&mut o, an, c);
    }
    change_points(&mut o, an, g);
    runs(&mut o, an);
    let _ = writeln!(o, "{SCRIPT}</body></html>");
    o
}

/// The gate's verdict on the newest Run.
fn verdict(o: &mut String, an: &Analysis, g: &Gate) {
    let reg = an.newest_regressions(g.threshold_pct);
    if reg.is_empty() {
        let _ = write!(
            o,
            "<p>No regression beyond {}% in the newest Run's segment.</p>",
            g.threshold_pct
        );
    }
    for c in reg {
        let _ = write!(
            o,
            "<p><b>Regression</b>: <a href=\"#cp-{}-{}\">{}</a>, beyond {}%.</p>",
            c.metric.name(),
            c.index,
            esc(&headline(c)),
            g.threshold_pct
        );
    }
}

/// One trend chart, its metrics' change points marked as links.
fn chart(o: &mut String, an: &Analysis, c: &Chart) {
    let series: Vec<Series> = c
        .lines
        .iter()
        .map(|&(m, color)| Series {
            name: short(m),
            color,
            points: an
                .runs
                .iter()
                .enumerate()
                .filter_map(|(i, e)| m.of(e).map(|v| ((i + 1) as f64, v * c.scale)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if series.is_empty() {
        return;
    }
    // One mark per place: the metrics of this chart that changed there, in one label
    // (three labels at one x would print over each other), linked to the first.
    let mut cps: Vec<(f64, String, String)> = Vec::new();
    for s in an
        .change_points
        .iter()
        .filter(|s| c.lines.iter().any(|(m, _)| *m == s.metric))
    {
        // Between the last Run before (position index) and the first after.
        let x = s.index as f64 + 0.5;
        let label = format!("{} {:+.0}%", short(s.metric), s.change_pct);
        match cps.iter_mut().find(|(at, ..)| *at == x) {
            Some((_, l, _)) => {
                l.push_str(", ");
                l.push_str(&label);
            }
            None => cps.push((x, label, format!("#cp-{}-{}", s.metric.name(), s.index))),
        }
    }
    let marks: Vec<Mark> = cps.iter().map(|(x, l, h)| Mark::XLink(*x, l, h)).collect();
    o.push_str(&lines_marked(
        c.title,
        c.unit,
        XAxis::Linear(""),
        &series,
        &marks,
    ));
}

/// Each change point: the two Runs it separates and how to compare them.
fn change_points(o: &mut String, an: &Analysis, g: &Gate) {
    o.push_str("<h2>Change points</h2>");
    if an.change_points.is_empty() {
        o.push_str("<p>None: no split of any number's series is significant.</p>");
        return;
    }
    for c in &an.change_points {
        let _ = write!(
            o,
            "<div class=\"f cp {}\" id=\"cp-{}-{}\"><h3>{} <span class=\"id\">({})</span></h3><ul><li>before: <a href=\"#run-{}\">{}</a></li><li>after: <a href=\"#run-{}\">{}</a></li></ul><div>compare them: <code>{}</code></div></div>",
            if c.regression { "bottleneck" } else { "info" },
            c.metric.name(),
            c.index,
            esc(&headline(c)),
            if c.regression { "worse" } else { "better" },
            c.before_id,
            esc(&describe(an, c.before_id)),
            c.after_id,
            esc(&describe(an, c.after_id)),
            esc(&compare_command(&g.db, c.before_id, c.after_id))
        );
    }
}

/// Every Run, oldest first.
fn runs(o: &mut String, an: &Analysis) {
    o.push_str("<h2>Runs</h2><table class=\"sort\"><thead><tr><th>#</th><th>id</th><th>time (UTC)</th><th>revision</th><th>req/s</th><th>p50</th><th>p99</th><th>max</th><th>errors</th><th>cpu/req</th><th>changes</th></tr></thead><tbody>");
    for (i, e) in an.runs.iter().enumerate() {
        let rev = e
            .origin
            .git_revision
            .as_deref()
            .map_or("-", |r| &r[..r.len().min(8)]);
        let marks: Vec<String> = an
            .change_points
            .iter()
            .filter(|c| c.index == i)
            .map(|c| {
                format!(
                    "<a href=\"#cp-{}-{}\">{} {:+.1}%</a>",
                    c.metric.name(),
                    c.index,
                    short(c.metric),
                    c.change_pct
                )
            })
            .collect();
        let us = |v: u64| format!("<td data-v=\"{v}\">{}</td>", fmt_us(v as f64));
        let _ = write!(
            o,
            "<tr id=\"run-{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td data-v=\"{}\">{}</td>{}{}{}<td>{}</td>{}<td>{}{}</td></tr>",
            e.id,
            i + 1,
            e.id,
            time(e.started_unix_s),
            esc(rev),
            e.requests_per_s,
            fmt_count(e.requests_per_s.round()),
            us(e.p50_us),
            us(e.p99_us),
            us(e.max_us),
            e.errors,
            e.server_cpu_us_per_request.map_or("<td>-</td>".into(), |v| format!(
                "<td data-v=\"{v}\">{}</td>",
                show(Metric::ServerCpuUsPerRequest, v)
            )),
            marks.join(", "),
            if e.trusted {
                String::new()
            } else {
                format!(" (untrusted: {})", esc(&e.distrust))
            }
        );
    }
    o.push_str("</tbody></table>");
}
