//! The JUnit XML view (`--junit FILE`): what CI systems (GitLab, Jenkins, GitHub
//! actions that read test reports) show as tests. One suite per Run; a testcase per
//! objective (a failure carrying the measured value against the wanted one), one per
//! bottleneck finding (a failure carrying its title, its numbers and its fix), and,
//! when the objectives were judged, one for the evidence (an error when it could not
//! be trusted: the objectives are then skipped, not failed). The layout is the one
//! Jenkins' and Surefire's schema describe (`testsuites` > `testsuite` with
//! `properties`, `testcase`s, `system-out`).

use std::fmt::Write as _;

use super::View;
use crate::run::{Kind, Run};

/// The JUnit view.
pub struct Junit;

impl View<Run> for Junit {
    fn render(&self, run: &Run) -> Vec<u8> {
        document(run).into_bytes()
    }
}

/// `s` as XML text or an attribute value: the five special characters as entities,
/// line breaks and tabs as character references (kept inside attributes, where a
/// parser would otherwise fold them into spaces), and the characters XML 1.0 cannot
/// carry at all (other control characters, lone surrogates cannot occur in a `str`)
/// as U+FFFD.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\n' => o.push_str("&#10;"),
            '\r' => o.push_str("&#13;"),
            '\t' => o.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

/// A testcase: its name and what it came to.
struct Case {
    class: &'static str,
    name: String,
    outcome: Outcome,
}

enum Outcome {
    Pass,
    /// (element, type, message, body)
    Fail(&'static str, &'static str, String, String),
    Skipped(String),
}

fn cases(run: &Run) -> Vec<Case> {
    let mut out = Vec::new();
    let untrusted = run.trust.as_ref().filter(|t| !t.trusted);
    if let Some(t) = &run.trust {
        out.push(Case {
            class: "loadlens.evidence",
            name: "evidence can be trusted".into(),
            outcome: match untrusted {
                Some(t) if t.judged_anyway => Outcome::Skipped(format!(
                    "evidence cannot be trusted, objectives judged anyway: {}",
                    t.why()
                )),
                Some(_) => Outcome::Fail(
                    "error",
                    "untrusted",
                    format!("evidence cannot be trusted: {}", t.why()),
                    t.reasons.join("\n"),
                ),
                None => Outcome::Pass,
            },
        });
    }
    for o in &run.objectives {
        let message = format!(
            "{} was {}, wanted {}",
            o.metric,
            o.measured_text(),
            o.wanted_text()
        );
        out.push(Case {
            class: "loadlens.objectives",
            name: o.objective.clone(),
            outcome: if untrusted.is_some_and(|t| !t.judged_anyway) {
                Outcome::Skipped(format!(
                    "not judged: evidence cannot be trusted ({message})"
                ))
            } else if o.met {
                Outcome::Pass
            } else {
                Outcome::Fail("failure", "objective-broken", message.clone(), message)
            },
        });
    }
    for f in run.findings.iter().filter(|f| f.kind == Kind::Bottleneck) {
        let facts: Vec<String> = f
            .evidence
            .iter()
            .map(|e| {
                format!(
                    "{} {} {}",
                    e.name,
                    super::findings::fmt_num(e.value),
                    e.unit
                )
            })
            .collect();
        out.push(Case {
            class: "loadlens.findings",
            name: f.id.clone(),
            outcome: Outcome::Fail(
                "failure",
                "bottleneck",
                f.title.clone(),
                format!(
                    "{}\n{}\n{}\nfix: {}",
                    f.title,
                    facts.join("; "),
                    f.explanation,
                    f.fix
                ),
            ),
        });
    }
    out
}

/// The whole document.
pub fn document(run: &Run) -> String {
    let cases = cases(run);
    let count = |want: fn(&Outcome) -> bool| cases.iter().filter(|c| want(&c.outcome)).count();
    let failures = count(|o| matches!(o, Outcome::Fail("failure", ..)));
    let errors = count(|o| matches!(o, Outcome::Fail("error", ..)));
    let skipped = count(|o| matches!(o, Outcome::Skipped(_)));
    let time = format!("{:.3}", run.results.duration_s);
    let name = escape(&format!("loadlens {} {}", run.spec.method, run.spec.url));
    let host = run
        .segment
        .as_ref()
        .map_or("localhost", |s| s.host.as_str());
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"loadlens\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time}\">",
        cases.len()
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"{name}\" package=\"loadlens\" id=\"0\" hostname=\"{}\" timestamp=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time}\">",
        escape(host),
        iso8601(run.started_unix_s),
        cases.len()
    );
    o.push_str("    <properties>\n");
    let r = &run.results;
    for (k, v) in [
        ("tool", run.tool.clone()),
        ("url", run.spec.url.clone()),
        ("connections", run.spec.connections.to_string()),
        ("responses", r.responses.to_string()),
        ("requests_per_s", format!("{:.2}", r.requests_per_s)),
        ("errors", r.errors.total().to_string()),
        ("non_2xx_3xx", r.non_2xx_3xx.to_string()),
    ] {
        let _ = writeln!(o, "      <property name=\"{k}\" value=\"{}\"/>", escape(&v));
    }
    o.push_str("    </properties>\n");
    for c in &cases {
        let _ = write!(
            o,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"",
            c.class,
            escape(&c.name)
        );
        match &c.outcome {
            Outcome::Pass => o.push_str("/>\n"),
            Outcome::Skipped(m) => {
                let _ = writeln!(o, "><skipped message=\"{}\"/></testcase>", escape(m));
            }
            Outcome::Fail(elem, kind, msg, body) => {
                let _ = writeln!(
                    o,
                    "><{elem} message=\"{}\" type=\"{kind}\">{}</{elem}></testcase>",
                    escape(msg),
                    escape(body)
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "    <system-out>{}</system-out>\n    <system-err/>\n  </testsuite>\n</testsuites>",
        escape(&super::terminal::render(run, true))
    );
    o
}

pub use crate::units::iso8601;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup_and_no_illegal_character() {
        assert_eq!(
            escape("p99<200ms & \"a\" 'b' > c"),
            "p99&lt;200ms &amp; &quot;a&quot; &apos;b&apos; &gt; c"
        );
        assert_eq!(
            escape("a\nb\tc\u{1}d\u{7f}é"),
            "a&#10;b&#9;c\u{FFFD}d\u{7f}é"
        );
        assert_eq!(escape("]]>"), "]]&gt;");
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(iso8601(0.0), "1970-01-01T00:00:00");
        assert_eq!(iso8601(951_782_400.0), "2000-02-29T00:00:00");
        assert_eq!(iso8601(1_795_000_000.7), "2026-11-18T11:06:40");
    }
}
