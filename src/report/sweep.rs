//! Views of a sweep: the study's table (as the published studies print them: a block
//! per row value, a column per connection count, requests/s, p99 and the first
//! bottleneck per cell), the ceiling's curve, and CSV (one line per cell).

use std::fmt::Write as _;

use super::View;
use crate::run::{Cell, Kind, Sweep};
use crate::units::fmt_us;

/// The sweep as text.
pub struct SweepText;

/// The sweep as CSV, one line per cell.
pub struct SweepCsv;

impl View<Sweep> for SweepText {
    fn render(&self, s: &Sweep) -> Vec<u8> {
        let mut o = match &s.ceiling {
            Some(_) => ceiling(s),
            None => grid(s),
        };
        o.push_str(&super::endpoints::sweep_text(s));
        if s.interrupted {
            o.push_str("interrupted: the cells above are the ones that ran\n");
        }
        o.into_bytes()
    }
}

pub(super) fn bottleneck(c: &Cell) -> &str {
    c.run
        .findings
        .iter()
        .find(|f| f.kind == Kind::Bottleneck)
        .map_or("-", |f| f.id.as_str())
}

pub(super) fn p99(c: &Cell) -> String {
    c.run
        .results
        .latency
        .at(99.0)
        .map_or("-".into(), |v| fmt_us(v as f64))
}

pub(super) fn dim_label(name: &str, value: &str) -> String {
    match name {
        "connreqs" if value == "keep-alive" => "keep-alive".to_string(),
        "connreqs" => format!(
            "{value} request{}/connection",
            if value == "1" { "" } else { "s" }
        ),
        "connections" => format!("-c {value}"),
        "threads" => format!("-t {value}"),
        "rate" => format!("-R {value}"),
        _ => value.to_string(),
    }
}

fn grid(s: &Sweep) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Sweep: {} cells", s.cells.len());
    const W: usize = 24;
    match s.dims.len() {
        // One or two varying dimensions: blocks of rows × columns, like the studies.
        1 | 2 => {
            let cols = s.dims.last().expect("a dimension");
            let blocks: Vec<Option<&String>> = if s.dims.len() == 2 {
                s.dims[0].values.iter().map(Some).collect()
            } else {
                vec![None]
            };
            for b in blocks {
                let cells: Vec<&Cell> = s
                    .cells
                    .iter()
                    .filter(|c| b.is_none_or(|b| &c.coords[0] == b))
                    .collect();
                if cells.is_empty() {
                    continue;
                }
                if let Some(b) = b {
                    let _ = writeln!(o, "\n  {}", dim_label(&s.dims[0].name, b));
                }
                let _ = write!(o, "  {:<14}", "");
                for v in &cols.values {
                    let _ = write!(o, "{:>W$}", dim_label(&cols.name, v));
                }
                let _ = writeln!(o);
                let cell = |v: &String| cells.iter().find(|c| c.coords.last() == Some(v));
                let row = |o: &mut String, label: &str, f: &dyn Fn(&Cell) -> String| {
                    let _ = write!(o, "  {label:<14}");
                    for v in &cols.values {
                        let _ = write!(o, "{:>W$}", cell(v).map_or("-".into(), |c| f(c)));
                    }
                    let _ = writeln!(o);
                };
                row(&mut o, "Reqs/s", &|c| {
                    format!("{:.0}", c.run.results.requests_per_s)
                });
                row(&mut o, "p99", &p99);
                row(&mut o, "errors", &|c| {
                    c.run.results.errors.total().to_string()
                });
                row(&mut o, "bottleneck", &|c| bottleneck(c).to_string());
            }
        }
        // Everything else (nothing varies, or three dimensions and more): a line per cell.
        _ => {
            let names: Vec<&str> = s.dims.iter().map(|d| d.name.as_str()).collect();
            let _ = writeln!(
                o,
                "  {}{:>12}{:>12}{:>8}  bottleneck",
                names.iter().map(|n| format!("{n:<14}")).collect::<String>(),
                "Reqs/s",
                "p99",
                "errors"
            );
            for c in &s.cells {
                let _ = writeln!(
                    o,
                    "  {}{:>12.0}{:>12}{:>8}  {}",
                    c.coords
                        .iter()
                        .map(|v| format!("{v:<14}"))
                        .collect::<String>(),
                    c.run.results.requests_per_s,
                    p99(c),
                    c.run.results.errors.total(),
                    bottleneck(c)
                );
            }
        }
    }
    o
}

fn ceiling(s: &Sweep) -> String {
    let c = s.ceiling.as_ref().expect("a ceiling");
    let mut o = String::new();
    let errors = c
        .errors
        .as_ref()
        .map_or(String::new(), |e| format!(", errors {e}"));
    match c.met_rate {
        Some(r) => {
            let _ = writeln!(o, "Ceiling at {}{errors}: {r:.0} requests/s met it", c.slo);
        }
        None => {
            let _ = writeln!(o, "Ceiling at {}{errors}: no rate tried met it", c.slo);
        }
    }
    if let (Some(r), Some(why)) = (c.broke_rate, &c.broke_because) {
        let _ = writeln!(
            o,
            "  at {r:.0} requests/s {why}{}",
            c.broke_finding
                .as_ref()
                .map_or(String::new(), |f| format!(" — {f}"))
        );
    }
    let _ = writeln!(o, "  search ended: {}", c.stopped);
    let _ = writeln!(
        o,
        "  {:>10}{:>12}{:>12}{:>12}{:>9}  objective",
        "rate/s", "achieved/s", "p50", "p99", "errors"
    );
    for st in &c.steps {
        let _ = writeln!(
            o,
            "  {:>10.0}{:>12.0}{:>12}{:>12}{:>8.2}%  {}",
            st.rate,
            st.achieved_per_s,
            fmt_us(st.p50_us as f64),
            fmt_us(st.p99_us as f64),
            st.errors_pct,
            if st.met { "met" } else { "broken" }
        );
    }
    let _ = writeln!(
        o,
        "  Latency measured from each request's scheduled time (open loop, corrected for coordinated omission)."
    );
    o
}

impl View<Sweep> for SweepCsv {
    /// A line per cell; a sweep of a mix adds an `endpoint` column (empty on the cell's
    /// line of all its requests) and a line per endpoint of each cell.
    fn render(&self, s: &Sweep) -> Vec<u8> {
        let mut o = String::new();
        let mut dims: Vec<&str> = match &s.ceiling {
            Some(_) => vec!["rate"],
            None => s.dims.iter().map(|d| d.name.as_str()).collect(),
        };
        let mixed = s.cells.iter().any(|c| !c.run.results.endpoints.is_empty());
        if mixed {
            dims.push("endpoint");
        }
        let _ = writeln!(
            o,
            "{}{}requests_per_s,p50_us,p90_us,p99_us,p99_9_us,max_us,errors,non_2xx_3xx,bottleneck",
            dims.join(","),
            if dims.is_empty() { "" } else { "," }
        );
        for c in &s.cells {
            let r = &c.run.results;
            let mut coords: Vec<String> = c.coords.iter().map(|v| csv_field(v)).collect();
            if mixed {
                coords.push(String::new());
            }
            let line = |o: &mut String,
                        coords: &[String],
                        l: &crate::run::LatencySummary,
                        rps: f64,
                        errors: u64,
                        non: u64,
                        b: &str| {
                let at = |p| l.at(p).map_or(String::new(), |v| v.to_string());
                let _ = writeln!(
                    o,
                    "{}{}{:.2},{},{},{},{},{},{},{},{}",
                    coords.join(","),
                    if coords.is_empty() { "" } else { "," },
                    rps,
                    at(50.0),
                    at(90.0),
                    at(99.0),
                    at(99.9),
                    l.max_us,
                    errors,
                    non,
                    b
                );
            };
            line(
                &mut o,
                &coords,
                &r.latency,
                r.requests_per_s,
                r.errors.total(),
                r.non_2xx_3xx,
                bottleneck(c),
            );
            for e in &r.endpoints {
                *coords.last_mut().expect("the endpoint column") = csv_field(&e.name);
                let rps = if r.duration_s > 0.0 {
                    e.responses as f64 / r.duration_s
                } else {
                    0.0
                };
                line(
                    &mut o,
                    &coords,
                    &e.latency,
                    rps,
                    e.errors,
                    super::endpoints::non_2xx_3xx_of(e),
                    "",
                );
            }
        }
        o.into_bytes()
    }
}

/// Quotes a CSV field that needs it (RFC 4180).
fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}
