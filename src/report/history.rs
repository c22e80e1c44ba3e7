//! Views of a test's history (`loadlens history NAME`): the CI files of
//! `--fail-on-regression`, in the shapes `run --slo` writes — JUnit XML (`--junit FILE`,
//! a testcase per number followed: a failure when the newest Run's segment began with a
//! regression beyond the threshold) and the Markdown summary (`--summary-md FILE`, also
//! appended to `$GITHUB_STEP_SUMMARY`) — and what every history view says about a change
//! point: the two stored Runs it separates and the `loadlens compare` line for them.
//! The HTML page is `html/history.rs`.

use std::fmt::Write as _;

use super::junit::{escape as xml, iso8601};
use super::markdown::escape as md;
use super::View;
use crate::history::{Analysis, Entry, Metric, Shift, METRICS};
use crate::units::{fmt_count, fmt_us};

/// What the history views need besides the Analysis: the database the Runs are in (for
/// the `compare` lines) and the gate's threshold.
#[derive(Debug, Clone)]
pub struct Gate {
    /// The `--db` path as given (or the default one).
    pub db: String,
    /// `--threshold`, percent.
    pub threshold_pct: f64,
}

/// The JUnit view of the gate.
pub struct HistoryJunit(pub Gate);

/// The Markdown summary of the gate.
pub struct HistoryMarkdown(pub Gate);

impl View<Analysis> for HistoryJunit {
    fn render(&self, an: &Analysis) -> Vec<u8> {
        junit(an, &self.0).into_bytes()
    }
}

impl View<Analysis> for HistoryMarkdown {
    fn render(&self, an: &Analysis) -> Vec<u8> {
        markdown(an, &self.0).into_bytes()
    }
}

/// The metric's short name in tables.
pub fn short(m: Metric) -> &'static str {
    match m {
        Metric::RequestsPerS => "req/s",
        Metric::P50Us => "p50",
        Metric::P99Us => "p99",
        Metric::MaxUs => "max",
        Metric::Errors => "errors",
        Metric::ServerCpuUsPerRequest => "cpu/req",
    }
}

/// A value of `m` with its unit.
pub fn show(m: Metric, v: f64) -> String {
    match m {
        Metric::RequestsPerS => format!("{} req/s", fmt_count(v.round())),
        Metric::Errors => format!("{v:.1}"),
        _ => fmt_us(v),
    }
}

/// `2026-11-27 01:13:50` (UTC).
pub fn time(unix_s: f64) -> String {
    iso8601(unix_s).replacen('T', " ", 1)
}

/// `s` quoted for a POSIX shell when it needs it.
fn shell(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The command that compares two stored Runs (bash, zsh: process substitution; each
/// `history show` writes a stored Run's JSON).
pub fn compare_command(db: &str, before: i64, after: i64) -> String {
    let db = shell(db);
    format!(
        "loadlens compare <(loadlens history show {before} --db {db}) <(loadlens history show {after} --db {db})"
    )
}

/// The stored Run with id `id` in the series, and its position (0 = oldest).
pub fn entry(an: &Analysis, id: i64) -> Option<(usize, &Entry)> {
    an.runs.iter().enumerate().find(|(_, e)| e.id == id)
}

/// `#20 (id 41, 2026-11-27 01:13:50, rev 1a2b3c4d)`.
pub fn describe(an: &Analysis, id: i64) -> String {
    match entry(an, id) {
        Some((i, e)) => {
            let rev = e
                .origin
                .git_revision
                .as_deref()
                .map(|r| format!(", rev {}", &r[..r.len().min(8)]))
                .unwrap_or_default();
            format!("#{} (id {id}, {}{rev})", i + 1, time(e.started_unix_s))
        }
        None => format!("id {id}"),
    }
}

/// One line for a change point: metric, where, before → after, change, p.
pub fn headline(c: &Shift) -> String {
    format!(
        "{} {:+.1}% from #{} on ({} → {}, p={:.3})",
        c.metric.name(),
        c.change_pct,
        c.index + 1,
        show(c.metric, c.mean_before),
        show(c.metric, c.mean_after),
        c.p
    )
}

/// The gate's verdict per metric: the regression that fails it, if any.
fn verdicts<'a>(an: &'a Analysis, g: &Gate) -> Vec<(Metric, Option<&'a Shift>)> {
    let failing = an.newest_regressions(g.threshold_pct);
    METRICS
        .iter()
        .filter(|m| an.runs.iter().any(|e| m.of(e).is_some()))
        .map(|&m| (m, failing.iter().copied().find(|s| s.metric == m)))
        .collect()
}

/// The JUnit document: one suite for the test's history, a testcase per number.
pub fn junit(an: &Analysis, g: &Gate) -> String {
    let v = verdicts(an, g);
    let failures = v.iter().filter(|(_, s)| s.is_some()).count();
    let newest = an.runs.last();
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"loadlens history\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"0\">",
        v.len()
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"{}\" package=\"loadlens.history\" id=\"0\" hostname=\"localhost\" timestamp=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"0\">",
        xml(&format!("loadlens history {}", an.name)),
        newest.map_or_else(|| iso8601(0.0), |e| iso8601(e.started_unix_s)),
        v.len()
    );
    o.push_str("    <properties>\n");
    let mut props = vec![
        ("name", an.name.clone()),
        ("runs", an.runs.len().to_string()),
        ("threshold_pct", format!("{}", g.threshold_pct)),
        ("db", g.db.clone()),
        ("change_points", an.change_points.len().to_string()),
    ];
    if let Some(m) = &an.machine {
        props.push(("machine", m.clone()));
    }
    if let Some(e) = newest {
        props.push(("newest_id", e.id.to_string()));
    }
    for (k, val) in props {
        let _ = writeln!(o, "      <property name=\"{k}\" value=\"{}\"/>", xml(&val));
    }
    o.push_str("    </properties>\n");
    for (m, fail) in &v {
        let _ = write!(
            o,
            "    <testcase classname=\"loadlens.history\" name=\"{}: no regression beyond {}%\" time=\"0\"",
            m.name(),
            g.threshold_pct
        );
        match fail {
            None => o.push_str("/>\n"),
            Some(c) => {
                let body = format!(
                    "{}\nbefore: {}\nafter: {}\ncompare: {}",
                    headline(c),
                    describe(an, c.before_id),
                    describe(an, c.after_id),
                    compare_command(&g.db, c.before_id, c.after_id)
                );
                let _ = writeln!(
                    o,
                    "><failure message=\"{}\" type=\"regression\">{}</failure></testcase>",
                    xml(&format!("{} (beyond {}%)", headline(c), g.threshold_pct)),
                    xml(&body)
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "    <system-out>{}</system-out>\n    <system-err/>\n  </testsuite>\n</testsuites>",
        xml(&change_point_lines(an, g))
    );
    o
}

/// Every change point, one line each, with its compare line.
fn change_point_lines(an: &Analysis, g: &Gate) -> String {
    let mut s = String::new();
    for c in &an.change_points {
        let _ = writeln!(
            s,
            "{} ({})\n  {}",
            headline(c),
            if c.regression { "worse" } else { "better" },
            compare_command(&g.db, c.before_id, c.after_id)
        );
    }
    if s.is_empty() {
        s.push_str("no change points\n");
    }
    s
}

/// The Markdown summary: the verdict, the newest Run's numbers against the gate, the
/// change points with the Runs they separate.
pub fn markdown(an: &Analysis, g: &Gate) -> String {
    let v = verdicts(an, g);
    let failing = v.iter().filter(|(_, s)| s.is_some()).count();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "## loadlens history: {} — {}\n",
        md(&an.name),
        if failing == 0 {
            format!("no regression beyond {}%", g.threshold_pct)
        } else {
            format!(
                "{failing} regression{} beyond {}%",
                if failing == 1 { "" } else { "s" },
                g.threshold_pct
            )
        }
    );
    let _ = writeln!(
        o,
        "{} Runs{}.\n",
        an.runs.len(),
        an.machine
            .as_ref()
            .map(|m| format!(" of machine {m}"))
            .unwrap_or_default()
    );
    o.push_str(
        "| number | newest | last change point | change | result |\n|---|---:|---:|---:|---|\n",
    );
    let newest = an.runs.last();
    for (m, fail) in &v {
        let last = an.change_points.iter().rfind(|s| s.metric == *m);
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            m.name(),
            newest
                .and_then(|e| m.of(e))
                .map_or("-".into(), |x| md(&show(*m, x))),
            last.map_or("-".into(), |c| format!("\\#{}", c.index + 1)),
            last.map_or("-".into(), |c| md(&format!("{:+.1}%", c.change_pct))),
            if fail.is_some() {
                "❌ regression"
            } else {
                "✅ pass"
            }
        );
    }
    o.push('\n');
    if !an.change_points.is_empty() {
        o.push_str("### Change points\n\n");
        for c in &an.change_points {
            let _ = writeln!(
                o,
                "- **{}** {} → {} ({})\n  ```\n  {}\n  ```",
                md(&headline(c)),
                md(&describe(an, c.before_id)),
                md(&describe(an, c.after_id)),
                if c.regression { "worse" } else { "better" },
                compare_command(&g.db, c.before_id, c.after_id)
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_for_the_shell_only_when_needed() {
        assert_eq!(shell("/tmp/h.db"), "/tmp/h.db");
        assert_eq!(shell("/tmp/my h.db"), "'/tmp/my h.db'");
        assert_eq!(shell("a'b"), r"'a'\''b'");
        assert_eq!(
            compare_command("/x/h.db", 3, 4),
            "loadlens compare <(loadlens history show 3 --db /x/h.db) <(loadlens history show 4 --db /x/h.db)"
        );
    }
}
