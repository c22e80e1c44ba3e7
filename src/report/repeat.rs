//! The repetitions block of a `--repeat N` run: the mean of each main number across
//! repetitions with its 95% confidence interval (Student's t), then one line per
//! repetition, so a reader sees both the estimate and the spread behind it.

use std::fmt::Write as _;

use crate::run::{Run, LOAD_METRICS};
use crate::stats::interval;
use crate::units::fmt_us;

pub fn render(run: &Run) -> String {
    let reps = &run.repetitions;
    let mut o = String::new();
    if reps.len() < 2 {
        return o;
    }
    let _ = writeln!(
        o,
        "Repetitions: {} (the totals above are over all of them)",
        reps.len()
    );
    let _ = writeln!(
        o,
        "  {:<16}{:>12}{:>12}{:>12}{:>12}",
        "", "mean", "± 95%", "min", "max"
    );
    // The rates and latencies (error counts are in the per-repetition lines).
    for m in LOAD_METRICS.iter().filter(|m| m.unit != "count") {
        let (label, latency) = (m.name, m.unit == "us");
        let xs: Vec<f64> = reps.iter().filter_map(|r| (m.value)(&r.results)).collect();
        if xs.len() < 2 {
            continue;
        }
        let i = interval(&xs);
        let fmt = |v: f64| {
            if latency {
                fmt_us(v)
            } else {
                format!("{v:.1}")
            }
        };
        let pm = if i.mean != 0.0 {
            format!("±{:.1}%", i.half_width * 100.0 / i.mean.abs())
        } else {
            "-".to_string()
        };
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let _ = writeln!(
            o,
            "  {label:<16}{:>12}{pm:>12}{:>12}{:>12}",
            fmt(i.mean),
            fmt(min),
            fmt(max)
        );
    }
    let _ = writeln!(
        o,
        "  {:<6}{:>12}{:>12}{:>12}{:>10}  first bottleneck",
        "rep", "requests/s", "p50", "p99", "errors"
    );
    for (k, r) in reps.iter().enumerate() {
        let top = r
            .findings
            .iter()
            .find(|f| f.kind == crate::run::Kind::Bottleneck)
            .map_or("-", |f| f.id.as_str());
        let at = |p| {
            r.results
                .latency
                .at(p)
                .map_or("-".into(), |v| fmt_us(v as f64))
        };
        let _ = writeln!(
            o,
            "  {:<6}{:>12.1}{:>12}{:>12}{:>10}  {top}",
            k + 1,
            r.results.requests_per_s,
            at(50.0),
            at(99.0),
            r.results.errors.total()
        );
    }
    o
}
