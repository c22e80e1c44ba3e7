//! The comparison table: one row per number, one column per run (the first is the
//! baseline), each later value with its change and verdict.

use std::fmt::Write as _;

use super::View;
use crate::run::{Comparison, Verdict};
use crate::units::{fmt_count, fmt_us};

/// The comparison as text.
pub struct CompareText;

impl View<Comparison> for CompareText {
    fn render(&self, c: &Comparison) -> Vec<u8> {
        render(c).into_bytes()
    }
}

pub(super) fn value(unit: &str, v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if unit == "us" => fmt_us(v),
        Some(v) if unit == "req/s" || unit == "/s" || unit == "ms/s" || unit == "%" => {
            format!("{v:.1}")
        }
        Some(v) if v.fract() == 0.0 && v.abs() < 1e3 => format!("{v:.0}"),
        Some(v) => fmt_count(v),
    }
}

pub(super) fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Significant => "significant",
        Verdict::NotSignificant => "not significant",
        Verdict::NotEnoughData => "not enough data",
    }
}

pub fn render(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Comparing {} runs with the first ({}):",
        c.runs.len(),
        c.runs[0].label
    );
    for (i, r) in c.runs.iter().enumerate() {
        let _ = writeln!(
            o,
            "  [{}] {}: {}{}",
            (b'A' + i as u8) as char,
            r.label,
            r.url,
            if r.repetitions > 1 {
                format!(", {} repetitions", r.repetitions)
            } else {
                String::new()
            }
        );
    }
    const W: usize = 12;
    let _ = write!(o, "{:<28}{:>W$}", "", "[A]");
    for i in 1..c.runs.len() {
        let _ = write!(
            o,
            "{:>W$}{:>9}  {:<34}",
            format!("[{}]", (b'A' + i as u8) as char),
            "change",
            "verdict"
        );
    }
    let _ = writeln!(o);
    let mut group = "load";
    for row in &c.rows {
        if row.group != group {
            group = &row.group;
            let _ = writeln!(
                o,
                "{}",
                if group == "endpoint" {
                    "Per endpoint:"
                } else {
                    "Evidence that moved most:"
                }
            );
        }
        if row.unit == "text" {
            let cells: Vec<String> = row
                .texts
                .iter()
                .enumerate()
                .map(|(i, t)| format!("[{}] {t}", (b'A' + i as u8) as char))
                .collect();
            let _ = writeln!(o, "{:<28}{}", row.metric, cells.join("   "));
            continue;
        }
        if row.metric.chars().count() > 27 {
            // A long endpoint name: on a line of its own, the numbers below it.
            let _ = writeln!(o, "{}", row.metric);
            let _ = write!(o, "{:<28}", "");
        } else {
            let _ = write!(o, "{:<28}", row.metric);
        }
        let _ = write!(o, "{:>W$}", value(&row.unit, row.values[0]));
        for (i, ch) in row.changes.iter().enumerate() {
            let v = value(&row.unit, row.values[i + 1]);
            let (pct, verdict) = match ch {
                Some(ch) => (
                    ch.pct.map_or("-".to_string(), |p| format!("{p:+.1}%")),
                    format!(
                        "{}{}",
                        verdict(ch.verdict),
                        ch.p_value
                            .map_or(String::new(), |p| format!(" (p={p:.3}, {})", ch.samples))
                    ),
                ),
                None => ("-".to_string(), String::new()),
            };
            let _ = write!(o, "{v:>W$}{pct:>9}  {verdict:<34}");
        }
        let _ = writeln!(o);
    }
    for w in &c.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    let _ = writeln!(o, "Method: {}", c.method);
    // Lines padded for the columns end in spaces; trim them.
    o.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}
