//! The findings block: bottlenecks first, each with its numbers, its mechanism and its
//! fix (the diagnosis ranked them; this only lays them out).

use std::fmt::Write as _;

use crate::run::{Finding, Kind};

/// The findings block: bottlenecks first, each with its numbers and its fix.
pub fn render(f: &[Finding]) -> String {
    let mut o = String::new();
    if f.is_empty() {
        let _ = writeln!(o, "Findings: nothing stood out in the evidence.");
        return o;
    }
    let _ = writeln!(o, "Findings (`loadlens explain ID` for more):");
    for x in f {
        let kind = match x.kind {
            Kind::Bottleneck => "BOTTLENECK",
            Kind::Warning => "WARNING",
            Kind::Info => "INFO",
        };
        let _ = writeln!(
            o,
            "{kind:<10}  {} [{}, confidence {:.0}%]",
            x.title,
            x.id,
            x.confidence * 100.0
        );
        if x.kind == Kind::Info {
            continue;
        }
        let ev: Vec<String> = x
            .evidence
            .iter()
            .map(|e| format!("{} {} {}", e.name, fmt_num(e.value), e.unit))
            .collect();
        let _ = writeln!(o, "  {}", ev.join("; "));
        let _ = writeln!(o, "  {}", x.explanation);
        let _ = writeln!(o, "  fix: {}", x.fix);
    }
    o
}

/// A fact's value as the reports show it: counts with thousands separators.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let s = format!("{}", v as i64);
        // Thousands separators for counts.
        let mut out = String::new();
        for (i, ch) in s.chars().rev().enumerate() {
            if i > 0 && i % 3 == 0 && ch != '-' {
                out.push(',');
            }
            out.push(ch);
        }
        out.chars().rev().collect()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}
