//! The Markdown summary (`--summary-md FILE`, appended to `$GITHUB_STEP_SUMMARY` too
//! when that is set): a headline saying what the Run came to, its headline numbers, the
//! objectives table and the findings — GitHub-flavoured Markdown tables, every value
//! that comes from outside (the URL, titles, fixes) escaped so it stays text.

use std::fmt::Write as _;

use super::objectives::{judged, result, trusted, untrusted_line};
use super::View;
use crate::run::{Kind, Run};
use crate::units::{fmt_bytes, fmt_us};

/// The Markdown view.
pub struct Markdown;

impl View<Run> for Markdown {
    fn render(&self, run: &Run) -> Vec<u8> {
        summary(run).into_bytes()
    }
}

/// `s` as Markdown text, also inside a table cell: every ASCII punctuation character
/// that Markdown or a table could read as syntax is backslash-escaped (CommonMark lets
/// any ASCII punctuation be escaped so), line breaks become spaces.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '{' | '}' | '[' | ']' | '<' | '>' | '(' | ')' | '#' | '+'
            | '-' | '!' | '|' | '~' | '&' | '"' => {
                o.push('\\');
                o.push(c);
            }
            '\n' | '\r' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// The whole summary.
pub fn summary(run: &Run) -> String {
    let r = &run.results;
    let mut o = String::new();
    let verdict = if !judged(run) {
        "evidence cannot be trusted"
    } else if run.objectives.is_empty() {
        "no objectives"
    } else if !trusted(run) && run.objectives.iter().all(|x| x.met) {
        "objectives met, evidence untrusted"
    } else if !trusted(run) {
        "objectives broken, evidence untrusted"
    } else if run.objectives.iter().all(|x| x.met) {
        "objectives met"
    } else {
        "objectives broken"
    };
    let _ = writeln!(
        o,
        "## loadlens: {} {} — {verdict}\n",
        escape(&run.spec.method),
        escape(&run.spec.url)
    );
    let _ = writeln!(
        o,
        "{} connections, {:.1} s, {}{}.\n",
        run.spec.connections,
        r.duration_s,
        match run.spec.rate {
            Some(x) =>
                format!("open loop at {x:.0} req/s (latency corrected for coordinated omission)"),
            None => "closed loop".into(),
        },
        run.interrupted
            .as_ref()
            .map(|s| format!(", interrupted by {s}"))
            .unwrap_or_default()
    );
    if let Some(line) = untrusted_line(run) {
        let _ = writeln!(o, "**{}**\n", escape(&line));
    }
    let p = |q: f64| r.latency.at(q).map_or("-".into(), |v| fmt_us(v as f64));
    o.push_str(
        "| requests | requests/s | p50 | p90 | p99 | max | errors | non-2xx/3xx | transfer/s |\n",
    );
    o.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let _ = writeln!(
        o,
        "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |\n",
        r.responses,
        r.requests_per_s,
        p(50.0),
        p(90.0),
        p(99.0),
        fmt_us(r.latency.max_us as f64),
        r.errors.total(),
        r.non_2xx_3xx,
        fmt_bytes(r.bytes_per_s)
    );
    if !run.objectives.is_empty() {
        o.push_str(
            "### Objectives\n\n| objective | measured | wanted | result |\n|---|---:|---:|---|\n",
        );
        for x in &run.objectives {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} |",
                escape(&x.objective),
                escape(&x.measured_text()),
                escape(&x.wanted_text()),
                result(run, x)
            );
        }
        o.push('\n');
    }
    o.push_str("### Findings\n\n");
    if run.findings.is_empty() {
        o.push_str("Nothing stood out in the evidence.\n");
    }
    for f in &run.findings {
        let kind = match f.kind {
            Kind::Bottleneck => "BOTTLENECK",
            Kind::Warning => "WARNING",
            Kind::Info => "INFO",
        };
        let _ = writeln!(
            o,
            "- **{kind}** {} (`{}`, confidence {:.0}%)",
            escape(&f.title),
            f.id.replace('`', ""),
            f.confidence * 100.0
        );
        if f.kind != Kind::Info {
            let _ = writeln!(o, "  - fix: {}", escape(&f.fix));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_text_stays_text() {
        assert_eq!(
            escape("a|b *c* `d` <e> [f](g)"),
            "a\\|b \\*c\\* \\`d\\` \\<e\\> \\[f\\]\\(g\\)"
        );
        assert_eq!(escape("x\ny"), "x y");
    }
}
