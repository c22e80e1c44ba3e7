//! docs/findings.md, generated from the code's own tables: the table of findings in the
//! order the rules run (`rules/table.rs`: each finding's texts and check), the evidence
//! each rule cites and the knobs its fix names (read from the rule's source, the file its
//! row's check names: `FindingId::check_source`), and what each server kind calls those
//! knobs (`kinds`). `tests/docs_current.rs` fails when the committed page differs;
//! `UPDATE_DOCS=1 cargo test --test docs_current` rewrites it.
//!
//! The evidence names and knobs are read from the rules' source text because they are
//! built inside each rule (`Counter::ListenOverflows.fact(…)`, `fact("rtt", …)`, `c.knob(Knob::Backlog)`):
//! a rule that starts citing a new number changes the page without a second list to keep.

use std::fmt::Write;

use super::kinds::{self, Knob};
use super::rules::ROWS;
use crate::run::ServerKind;

/// Every knob (its variant's name, as the rules spell it, and a heading), in the order
/// the page lists them.
const KNOBS: &[(Knob, &str, &str)] = &[
    (Knob::Workers, "Workers", "workers"),
    (Knob::Connections, "Connections", "connection limit"),
    (Knob::Backlog, "Backlog", "listen backlog"),
    (Knob::OpenFiles, "OpenFiles", "open files"),
    (Knob::Affinity, "Affinity", "CPU affinity"),
    (Knob::UpstreamReuse, "UpstreamReuse", "upstream keep-alive"),
    (Knob::Reuseport, "Reuseport", "an accept queue per worker"),
    (Knob::KeepAlive, "KeepAlive", "client keep-alive"),
    (Knob::Pool, "Pool", "request pool (threads, children)"),
    (Knob::UdpBuffer, "UdpBuffer", "UDP (QUIC) receive buffer"),
];

/// A compile error when a knob is added and the list above is not (the kinds are
/// their registry, `ServerKind::all`).
#[allow(dead_code)]
fn listed(n: Knob) {
    use Knob::*;
    match n {
        Workers | Connections | Backlog | OpenFiles | Affinity | UpstreamReuse | Reuseport
        | KeepAlive | Pool | UdpBuffer => {}
    }
}

/// The counter named just before `.fact(` (`Counter::ListenOverflows`).
fn counter_before(text: &str) -> Option<crate::run::Counter> {
    let at = text.rfind("Counter::")?;
    let name = &text[at + "Counter::".len()..];
    crate::run::Counter::ALL
        .iter()
        .copied()
        .find(|c| format!("{c:?}") == name)
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// A function's text in `src`, from `fn name(` to the closing brace at column 0.
fn body<'a>(src: &'a str, name: &str) -> Option<&'a str> {
    let start = src.find(&format!("fn {name}("))?;
    let end = src[start..]
        .find("\n}\n")
        .map_or(src.len(), |e| start + e + 3);
    Some(&src[start..end])
}

/// Whether `text` calls `name(`.
fn calls(text: &str, name: &str) -> bool {
    let call = format!("{name}(");
    text.match_indices(&call)
        .any(|(i, _)| !text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// The function's text in its file's `src` and that of the functions of the same file it
/// calls (one level): a rule often builds its finding in a helper.
fn rule_text(src: &str, function: &str) -> String {
    let Some(own) = body(src, function) else {
        return String::new();
    };
    let mut text = own.to_string();
    for (i, _) in src.match_indices("fn ") {
        let name = ident(&src[i + 3..]);
        if !name.is_empty() && name != function && calls(own, name) {
            text.extend(body(src, name));
        }
    }
    text
}

/// A string literal at the start of `s` (after `"`), unescaped; a `format!`
/// placeholder (`{what}`) becomes `…`.
fn literal(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            '"' => break,
            '{' => {
                chars.by_ref().take_while(|c| *c != '}').for_each(drop);
                out.push('…');
            }
            c => out.push(c),
        }
    }
    out
}

/// The evidence names a rule cites: the names of its `fact(…)` calls (a literal, a
/// `format!` whose placeholders are left as `{…}`, or a constant of the same file), and
/// the error-log classes it quotes (`logged(c, "class")`).
fn evidence(src: &str, text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |n: String| {
        if !n.is_empty() && !names.contains(&n) {
            names.push(n);
        }
    };
    for (i, _) in text.match_indices("fact(") {
        if text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let arg = text[i + 5..].trim_start();
        if let Some(c) = text[..i].strip_suffix('.').and_then(counter_before) {
            add(c.key().to_string());
        } else if let Some(s) = arg.strip_prefix('"') {
            add(literal(s));
        } else if let Some(s) = arg.strip_prefix("&format!(\"") {
            add(literal(s));
        } else {
            let name = ident(arg);
            let def = format!("const {name}: &str = \"");
            if let Some(at) = src.find(&def).filter(|_| !name.is_empty()) {
                add(literal(&src[at + def.len()..]));
            }
        }
    }
    for (i, _) in text.match_indices("logged(c, \"") {
        add(format!(
            "error log lines \"{}\"",
            literal(&text[i + "logged(c, \"".len()..])
        ));
    }
    names
}

/// The knobs a rule's fix names (`Knob::X` in its text), in the page's order.
fn knobs(text: &str) -> Vec<(Knob, &'static str, &'static str)> {
    KNOBS
        .iter()
        .filter(|(_, name, _)| {
            text.match_indices(&format!("Knob::{name}")).any(|(i, _)| {
                !text[i + 6 + name.len()..].starts_with(|c: char| c.is_alphanumeric())
            })
        })
        .copied()
        .collect()
}

/// The anchor a repository host gives a `### id` heading.
pub fn anchor(id: &str) -> String {
    id.to_lowercase()
}

/// The whole of docs/findings.md.
pub fn findings_markdown() -> String {
    let mut md = String::new();
    md.push_str(
        "<!-- Generated by src/diagnose/catalog.rs from the table of findings \
         (src/diagnose/rules/table.rs: the rules, their texts) and the server kinds \
         (src/diagnose/kinds.rs). \
         Do not edit: run `UPDATE_DOCS=1 cargo test --test docs_current`. -->\n\n",
    );
    md.push_str("# Findings\n\n");
    md.push_str(
        "Every finding loadlens can report, in the order its rules run (ties in confidence keep \
         this order). For each: what it means, the evidence it cites (the names in the \
         report's evidence line and in the Run's `findings[].evidence`), how to confirm it by \
         hand, and the fix in the words of each server kind loadlens knows. \
         `loadlens explain ID` prints the same text; [reading the report](guide/reading-the-report.md) \
         says how findings are ranked.\n\n",
    );
    md.push_str("| id | means |\n|---|---|\n");
    for r in ROWS {
        let id = r.id.as_str();
        let _ = writeln!(md, "| [`{id}`](#{}) | {} |", anchor(id), r.means);
    }
    md.push('\n');
    for r in ROWS {
        let _ = write!(md, "## {}\n\n{}.\n\n", r.id, capitalised(r.means));
        let src = r.id.check_source();
        let text = (src, rule_text(src, r.check_at.1));
        for part in r.long.split('\n') {
            let (label, rest) = part.split_once(": ").unwrap_or(("", part));
            match label {
                "Mechanism" => {
                    let _ = writeln!(md, "**What it means.** {}\n", capitalised(rest));
                    let ev = evidence(text.0, &text.1);
                    if !ev.is_empty() {
                        let list: Vec<String> = ev.iter().map(|e| format!("`{e}`")).collect();
                        let _ = writeln!(md, "**Evidence it cites.** {}\n", list.join(", "));
                    }
                }
                "Confirm" => {
                    let _ = writeln!(md, "**Confirm by hand.** {rest}\n");
                }
                "Fix" => {
                    let _ = writeln!(md, "**Fix.** {rest}\n");
                }
                "Source" => {
                    let _ = writeln!(md, "**Source.** {rest}\n");
                }
                _ => {
                    let _ = writeln!(md, "{part}\n");
                }
            }
        }
        let ks = knobs(&text.1);
        if !ks.is_empty() {
            md.push_str("**The fix per server kind** (other servers get the generic wording):\n\n");
            md.push_str("| server | ");
            md.push_str(&ks.iter().map(|k| k.2).collect::<Vec<_>>().join(" | "));
            md.push_str(" |\n|---|");
            md.push_str(&"---|".repeat(ks.len()));
            md.push('\n');
            for info in ServerKind::all() {
                let (kind, name) = (info.kind, info.title);
                let cells: Vec<String> = ks
                    .iter()
                    .map(|(k, _, _)| {
                        kinds::knob(kind, *k).map_or("—".to_string(), |p| p.replace('|', "\\|"))
                    })
                    .collect();
                if cells.iter().all(|c| c == "—") {
                    continue;
                }
                let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
            }
            md.push('\n');
        }
    }
    while md.ends_with("\n\n") {
        md.pop();
    }
    md
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_its_texts_its_check_and_evidence() {
        for r in ROWS {
            assert!(
                !rule_text(r.id.check_source(), r.check_at.1).is_empty(),
                "{}",
                r.id
            );
        }
        let md = findings_markdown();
        assert!(
            md.contains("`TcpExt.ListenOverflows`"),
            "listen-queue-overflow's evidence"
        );
        assert!(
            md.contains("`MaxRequestWorkers`"),
            "Apache's connection limit"
        );
    }
}
