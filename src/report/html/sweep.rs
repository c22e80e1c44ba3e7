//! The sweep page: the cell table as a heat map (requests/s and p99, each coloured from
//! worst to best), every cell in a sortable table, and for a ceiling search the rate →
//! latency curve with the objective's line and the ceiling marked.

use std::fmt::Write;

use super::super::chart::{esc, lines, lines_marked, Mark, Series, XAxis};
use super::super::sweep::{bottleneck, dim_label, p99, SweepText};
use super::super::View;
use super::Html;
use crate::run::{Ceiling, Cell, Sweep};

impl View<Sweep> for Html {
    fn render(&self, s: &Sweep) -> Vec<u8> {
        let mut body = String::new();
        if s.interrupted {
            body.push_str("<p><b>Interrupted</b>: not every cell ran.</p>");
        }
        match &s.ceiling {
            Some(c) => curve(&mut body, c),
            None => {
                let pts: Vec<(f64, f64)> = s
                    .cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i as f64, c.run.results.requests_per_s))
                    .collect();
                body.push_str(&lines(
                    "requests/s by cell (in the table's order)",
                    "",
                    XAxis::Linear(""),
                    &[Series {
                        name: "requests/s",
                        color: "#0072b2",
                        points: pts,
                    }],
                ));
            }
        }
        heat_maps(&mut body, s);
        cells(&mut body, s);
        super::super::endpoints::sweep_html(&mut body, s);
        let text = SweepText.render(s);
        let _ = write!(
            body,
            "<details><summary>the terminal report</summary><pre>{}</pre></details>",
            esc(&String::from_utf8_lossy(&text))
        );
        super::wrap("loadlens sweep", &body).into_bytes()
    }
}

/// The objective's bound in ms, read back from its text (`p99<200ms`, `p99.9 <= 1s`).
fn slo_bound_ms(slo: &str) -> Option<f64> {
    let bound = slo.rsplit('<').next()?.trim_start_matches('=').trim();
    Some(crate::units::parse_duration(bound).ok()?.as_secs_f64() * 1000.0)
}

/// The rate → latency curve of a ceiling search: p50 and the objective's percentile by
/// scheduled rate, the objective as a line, the highest rate that met it marked.
fn curve(o: &mut String, c: &Ceiling) {
    let name = c.slo.split('<').next().unwrap_or("").trim().to_string();
    let pts = |f: &dyn Fn(&crate::run::Step) -> u64| -> Vec<(f64, f64)> {
        c.steps
            .iter()
            .map(|st| (st.rate, f(st) as f64 / 1000.0))
            .collect()
    };
    let mut series = vec![Series {
        name: "p50",
        color: "#009e73",
        points: pts(&|st| st.p50_us),
    }];
    if name != "p99" {
        series.push(Series {
            name: "p99",
            color: "#e69f00",
            points: pts(&|st| st.p99_us),
        });
    }
    series.push(Series {
        name: &name,
        color: "#0072b2",
        points: pts(&|st| st.slo_value_us),
    });
    let objective = format!("objective {}", c.slo);
    let ceiling = c
        .met_rate
        .map(|r| format!("ceiling {r:.0}/s"))
        .unwrap_or_default();
    let mut marks = Vec::new();
    if let Some(ms) = slo_bound_ms(&c.slo) {
        marks.push(Mark::Y(ms, &objective));
    }
    if let Some(r) = c.met_rate {
        marks.push(Mark::X(r, &ceiling));
    }
    o.push_str(&lines_marked(
        "latency by scheduled rate (requests/s)",
        "ms",
        XAxis::Linear("/s"),
        &series,
        &marks,
    ));
    let _ = write!(
        o,
        "<p>Highest rate that met {}: <b>{}</b>{}{}.</p>",
        esc(&c.slo),
        c.met_rate
            .map_or("none".to_string(), |r| format!("{r:.0} requests/s")),
        c.broke_because
            .as_ref()
            .map_or(String::new(), |b| format!("; above it {}", esc(b))),
        c.broke_finding
            .as_ref()
            .map_or(String::new(), |f| format!(", first bottleneck {}", esc(f)))
    );
}

/// A background from red (worst) to green (best); `t` in 0..=1, 1 is best.
fn heat(t: f64) -> String {
    format!("hsl({:.0},70%,72%)", 120.0 * t.clamp(0.0, 1.0))
}

/// Where `v` sits between the worst and best of `all` (1 = best).
fn score(v: f64, all: &[f64], higher_is_better: bool) -> f64 {
    let (lo, hi) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
    if hi <= lo {
        return 1.0;
    }
    let t = (v - lo) / (hi - lo);
    if higher_is_better {
        t
    } else {
        1.0 - t
    }
}

fn rps(c: &Cell) -> f64 {
    c.run.results.requests_per_s
}

fn p99_us(c: &Cell) -> f64 {
    c.run.results.latency.at(99.0).unwrap_or(0) as f64
}

/// The grid (rows: the first dimension's values, columns: the last's) twice, coloured
/// by requests/s and by p99. Only for one or two dimensions, like the terminal's table.
fn heat_maps(o: &mut String, s: &Sweep) {
    if !(1..=2).contains(&s.dims.len()) || s.cells.is_empty() {
        return;
    }
    let cols = s.dims.last().expect("a dimension");
    let rows: Vec<Option<&String>> = if s.dims.len() == 2 {
        s.dims[0].values.iter().map(Some).collect()
    } else {
        vec![None]
    };
    type Measure = (&'static str, fn(&Cell) -> f64, bool);
    let measures: [Measure; 2] = [("requests/s", rps, true), ("p99", p99_us, false)];
    for (what, f, higher_is_better) in measures {
        let all: Vec<f64> = s.cells.iter().map(f).collect();
        let _ = write!(
            o,
            "<h2>{what} by cell</h2><table class=\"heat\"><thead><tr><th></th>"
        );
        for v in &cols.values {
            let _ = write!(o, "<th>{}</th>", esc(&dim_label(&cols.name, v)));
        }
        o.push_str("</tr></thead><tbody>");
        for r in &rows {
            let _ = write!(
                o,
                "<tr><th>{}</th>",
                r.map_or(String::new(), |r| esc(&dim_label(&s.dims[0].name, r)))
            );
            for v in &cols.values {
                let cell = s
                    .cells
                    .iter()
                    .find(|c| c.coords.last() == Some(v) && r.is_none_or(|r| &c.coords[0] == r));
                match cell {
                    Some(c) => {
                        let shown = if higher_is_better {
                            format!("{:.0}", f(c))
                        } else {
                            p99(c)
                        };
                        let _ = write!(
                            o,
                            "<td style=\"background:{}\" title=\"{}\">{}</td>",
                            heat(score(f(c), &all, higher_is_better)),
                            esc(bottleneck(c)),
                            esc(&shown)
                        );
                    }
                    None => o.push_str("<td>-</td>"),
                }
            }
            o.push_str("</tr>");
        }
        o.push_str("</tbody></table>");
    }
}

/// Every cell, one row each, sortable by any column.
fn cells(o: &mut String, s: &Sweep) {
    o.push_str("<h2>Every cell</h2><table class=\"sort\"><thead><tr>");
    // A ceiling search has no dimensions: its cells' one coordinate is the rate tried
    // (or `closed`, the closed-loop probe).
    let n = s.cells.iter().map(|c| c.coords.len()).max().unwrap_or(0);
    for i in 0..n {
        let name = s
            .dims
            .get(i)
            .map_or(if s.ceiling.is_some() { "rate" } else { "load" }, |d| {
                d.name.as_str()
            });
        let _ = write!(o, "<th>{}</th>", esc(name));
    }
    o.push_str(
        "<th>requests/s</th><th>p99</th><th>errors</th><th>bottleneck</th></tr></thead><tbody>",
    );
    let all_rps: Vec<f64> = s.cells.iter().map(rps).collect();
    let all_p99: Vec<f64> = s.cells.iter().map(p99_us).collect();
    for c in &s.cells {
        o.push_str("<tr>");
        for v in &c.coords {
            let _ = write!(o, "<td>{}</td>", esc(v));
        }
        let _ = write!(
            o,
            "<td data-v=\"{r:.1}\" style=\"background:{}\">{r:.0}</td><td data-v=\"{p:.0}\" style=\"background:{}\">{}</td><td>{}</td><td>{}</td></tr>",
            heat(score(rps(c), &all_rps, true)),
            heat(score(p99_us(c), &all_p99, false)),
            esc(&p99(c)),
            c.run.results.errors.total(),
            esc(bottleneck(c)),
            r = rps(c),
            p = p99_us(c),
        );
    }
    o.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_objective_bound_is_read_back_from_its_text() {
        assert_eq!(slo_bound_ms("p99<200ms"), Some(200.0));
        assert_eq!(slo_bound_ms("p99.9 <= 1s"), Some(1000.0));
        assert_eq!(slo_bound_ms("nonsense"), None);
        assert_eq!(score(5.0, &[0.0, 10.0], true), 0.5);
        assert_eq!(score(10.0, &[0.0, 10.0], false), 0.0);
        assert_eq!(heat(1.0), "hsl(120,70%,72%)");
    }
}
