//! The compare page: the Runs' latency spectra and per-second timelines overlaid (one
//! colour per Run), beside the side-by-side table with each change and its verdict.
//! The Comparison holds the numbers; the Runs themselves are needed to draw the curves,
//! so this view carries them.

use std::fmt::Write;

use super::super::chart::{esc, lines, Series, XAxis};
use super::super::compare::{value, verdict};
use super::super::View;
use crate::run::{Comparison, Run};

/// The HTML view of a Comparison, with the Runs it compares (in the same order).
pub struct CompareHtml {
    pub runs: Vec<Run>,
}

/// One colour per Run: the baseline blue, the others in the same colour-blind-safe set.
const COLORS: [&str; 6] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
];

fn letter(i: usize) -> char {
    (b'A' + i as u8) as char
}

impl View<Comparison> for CompareHtml {
    fn render(&self, c: &Comparison) -> Vec<u8> {
        let mut o = String::new();
        o.push_str("<ul>");
        for (i, r) in c.runs.iter().enumerate() {
            let _ = write!(
                o,
                "<li><b style=\"color:{}\">[{}]</b> {}: {}{}{}</li>",
                COLORS[i % COLORS.len()],
                letter(i),
                esc(&r.label),
                esc(&r.url),
                if r.repetitions > 1 {
                    format!(", {} repetitions", r.repetitions)
                } else {
                    String::new()
                },
                if r.client_saturated {
                    " (load generator saturated: a floor)"
                } else {
                    ""
                }
            );
        }
        o.push_str("</ul>");
        for w in &c.warnings {
            let _ = write!(o, "<p><b>warning:</b> {}</p>", esc(w));
        }
        let names: Vec<String> = c
            .runs
            .iter()
            .enumerate()
            .map(|(i, r)| format!("[{}] {}", letter(i), short(&r.label)))
            .collect();
        let overlay = |f: &dyn Fn(&Run) -> Vec<(f64, f64)>| -> Vec<Series> {
            self.runs
                .iter()
                .zip(&names)
                .enumerate()
                .map(|(i, (r, n))| Series {
                    name: n,
                    color: COLORS[i % COLORS.len()],
                    points: f(r),
                })
                .collect()
        };
        o.push_str(&lines(
            "latency by percentile, each run (whole run)",
            "ms",
            XAxis::Percentile,
            &overlay(&super::spectrum_points),
        ));
        o.push_str(&lines(
            "responses/s, second by second, each run",
            "",
            XAxis::Linear("s"),
            &overlay(&super::per_second),
        ));
        o.push_str(&lines(
            "p99 per second, each run",
            "ms",
            XAxis::Linear("s"),
            &overlay(&|r: &Run| {
                r.results
                    .timeline
                    .iter()
                    .filter(|s| s.responses > 0)
                    .map(|s| (s.t_s as f64, s.p99_us as f64 / 1000.0))
                    .collect()
            }),
        ));
        table(&mut o, c);
        let _ = write!(o, "<p class=\"sub\">Method: {}</p>", esc(&c.method));
        super::wrap("loadlens compare", &o).into_bytes()
    }
}

/// A file name without its directories (the legend has little room).
fn short(label: &str) -> &str {
    label.rsplit('/').next().unwrap_or(label)
}

/// The side-by-side table, sortable; names (first bottleneck) as text rows.
fn table(o: &mut String, c: &Comparison) {
    o.push_str("<h2>Side by side</h2><table class=\"sort\"><thead><tr><th>metric</th>");
    for i in 0..c.runs.len() {
        let _ = write!(o, "<th>[{}]</th>", letter(i));
        if i > 0 {
            o.push_str("<th>change</th><th>verdict</th>");
        }
    }
    o.push_str("<th>group</th></tr></thead><tbody>");
    for row in &c.rows {
        let _ = write!(o, "<tr><td>{}</td>", esc(&row.metric));
        if row.unit == "text" {
            for i in 0..c.runs.len() {
                let t = row.texts.get(i).map_or("-", |t| t.as_str());
                let _ = write!(o, "<td>{}</td>", esc(t));
                if i > 0 {
                    o.push_str("<td></td><td></td>");
                }
            }
        } else {
            for i in 0..c.runs.len() {
                let v = row.values.get(i).copied().flatten();
                let _ = write!(
                    o,
                    "<td data-v=\"{}\">{}</td>",
                    v.map_or(String::new(), |v| v.to_string()),
                    esc(&value(&row.unit, v))
                );
                if i == 0 {
                    continue;
                }
                match row.changes.get(i - 1).and_then(|c| c.as_ref()) {
                    Some(ch) => {
                        let _ = write!(
                            o,
                            "<td>{}</td><td>{}{}</td>",
                            ch.pct.map_or("-".to_string(), |p| format!("{p:+.1}%")),
                            verdict(ch.verdict),
                            ch.p_value
                                .map_or(String::new(), |p| format!(" (p={p:.3}, {})", ch.samples))
                        );
                    }
                    None => o.push_str("<td>-</td><td></td>"),
                }
            }
        }
        let _ = write!(o, "<td>{}</td></tr>", esc(&row.group));
    }
    o.push_str("</tbody></table>");
}
