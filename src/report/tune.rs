//! The terminal view of a tune session: the baseline, then each step — the change, its
//! pairs, the interval of the gain and what was decided — and how to undo what stayed.

use std::fmt::Write as _;

use crate::run::{Decision, TuneEdit, TuneSession};
use crate::units::fmt_us;

fn edit_line(e: &TuneEdit) -> String {
    match e {
        TuneEdit::Directive {
            server,
            file,
            directive,
            old,
            new,
            block,
            ..
        } => match (old, block) {
            (Some(o), _) => format!("{} `{directive}` {o} → {new}  ({file})", server.name()),
            (None, Some(b)) => format!(
                "{} `{directive} {new}` added to `{b}`  ({file})",
                server.name()
            ),
            (None, None) => format!("{} `{directive} {new}` added  ({file})", server.name()),
        },
        TuneEdit::Sysctl { key, old, new, .. } => {
            format!("sysctl {key} {old} → {new}  (the server's network namespace)")
        }
    }
}

/// The session as text.
pub fn render(s: &TuneSession) -> String {
    let mut o = String::new();
    let unit = if s.higher_is_better {
        ""
    } else {
        " (lower is better)"
    };
    let _ = writeln!(
        o,
        "\ntune: objective {}{unit}; {} A/B pairs per change; kept when the gain's 95% interval is above +{}%{}",
        s.objective,
        s.pairs,
        s.min_gain_pct,
        if s.applied { "" } else { "; dry run" }
    );
    let b = &s.baseline;
    let _ = writeln!(
        o,
        "baseline: {:.1} {}, {:.1} 2xx/3xx per s, p99 {}, {} errors, {} non-2xx/3xx",
        b.objective,
        s.objective,
        b.good_per_s,
        fmt_us(b.p99_us as f64),
        b.errors,
        b.non_2xx_3xx
    );
    for (i, st) in s.steps.iter().enumerate() {
        let _ = writeln!(o, "\nstep {}: {} — {}", i + 1, st.finding, st.reason);
        for e in &st.edits {
            let _ = writeln!(o, "  change: {}", edit_line(e));
        }
        if !st.pairs.is_empty() {
            let _ = writeln!(
                o,
                "  {:>4} {:>12} {:>12} {:>9}",
                "pair", "old", "new", "gain"
            );
            for (n, p) in st.pairs.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "  {:>4} {:>12.1} {:>12.1} {:>8.1}%",
                    n + 1,
                    p.old.objective,
                    p.new.objective,
                    p.gain_pct
                );
            }
        }
        let word = match st.decision {
            Decision::DryRun => "DRY RUN",
            Decision::Kept => "KEPT",
            Decision::Reverted => "REVERTED",
            Decision::Failed => "FAILED",
            Decision::Interrupted => "INTERRUPTED",
        };
        let _ = writeln!(o, "  {word}: {}", st.why);
        if st.decision == Decision::DryRun {
            o.push_str(&st.diff);
        }
    }
    if !s.restore_commands.is_empty() {
        let _ = writeln!(o, "\nsysctls left changed; to put them back:");
        for c in &s.restore_commands {
            let _ = writeln!(o, "  {c}");
        }
    }
    if let Some(sig) = &s.interrupted {
        let _ = writeln!(
            o,
            "\ninterrupted by {sig}: the original config was put back"
        );
    }
    o
}

/// What became of a step, in one word.
fn word(d: Decision) -> &'static str {
    match d {
        Decision::DryRun => "dry run",
        Decision::Kept => "kept",
        Decision::Reverted => "reverted",
        Decision::Failed => "failed",
        Decision::Interrupted => "interrupted",
    }
}

/// The session as a story in the HTML page of its Run: before (the baseline), each
/// step (the finding, the change and its diff, every pair's numbers, the gain's
/// interval, kept or put back and why), after (what is live now).
pub fn html(o: &mut String, s: &TuneSession) {
    use super::chart::esc;
    let dir = if s.higher_is_better {
        "higher is better"
    } else {
        "lower is better"
    };
    let _ = write!(
        o,
        "<h2 id=\"tune\">Tune: {} step{}</h2><p class=\"sub\">objective <b>{}</b> ({dir}); {} A/B pairs per change (old, new, …, reloading between); a change is kept when the 95% interval of its gain is above +{}%{}</p>",
        s.steps.len(),
        if s.steps.len() == 1 { "" } else { "s" },
        esc(&s.objective),
        s.pairs,
        s.min_gain_pct,
        if s.applied { "" } else { "; a dry run: nothing was written" }
    );
    let b = &s.baseline;
    let _ = write!(
        o,
        "<h3>Before</h3><div class=\"kpi\"><div>{}<b>{:.1}</b></div><div>2xx/3xx per s<b>{:.1}</b></div><div>p99<b>{}</b></div><div>errors<b>{}</b></div><div>non-2xx/3xx<b>{}</b></div></div>",
        esc(&s.objective),
        b.objective,
        b.good_per_s,
        esc(&fmt_us(b.p99_us as f64)),
        b.errors,
        b.non_2xx_3xx
    );
    for (i, st) in s.steps.iter().enumerate() {
        let class = match st.decision {
            Decision::Kept => "info",
            Decision::DryRun => "warning",
            _ => "bottleneck",
        };
        let _ = write!(
            o,
            "<div class=\"f {class} step\" data-decision=\"{}\"><h3>Step {}: {} <span class=\"id\">[{}]</span></h3><p>{}</p><ul>",
            word(st.decision),
            i + 1,
            word(st.decision).to_uppercase(),
            esc(&st.finding),
            esc(&st.reason)
        );
        for e in &st.edits {
            let _ = write!(o, "<li>{}</li>", esc(&edit_line(e)));
        }
        o.push_str("</ul>");
        if !st.diff.is_empty() {
            let _ = write!(
                o,
                "<details><summary>the diff</summary><pre>{}</pre></details>",
                esc(&st.diff)
            );
        }
        if !st.pairs.is_empty() {
            let _ = write!(
                o,
                "<table class=\"pairs\"><thead><tr><th>pair</th><th>old</th><th>new</th><th>gain</th></tr></thead><tbody>"
            );
            for (n, p) in st.pairs.iter().enumerate() {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:+.1}%</td></tr>",
                    n + 1,
                    p.old.objective,
                    p.new.objective,
                    p.gain_pct
                );
            }
            o.push_str("</tbody></table>");
        }
        if let Some(g) = &st.gain {
            let _ = write!(
                o,
                "<p class=\"gain\">gain <b>{:+.1}%</b>, 95% interval <b>{:+.1}% to {:+.1}%</b> over {} pairs; spread old {:.1}%, new {:.1}%</p>",
                g.mean_pct, g.low_pct, g.high_pct, g.pairs, g.spread_old_pct, g.spread_new_pct
            );
        }
        let _ = write!(
            o,
            "<p class=\"fix\"><b>{}</b>: {}</p></div>",
            word(st.decision),
            esc(&st.why)
        );
    }
    o.push_str("<h3>After</h3>");
    let kept: Vec<&TuneEdit> = s
        .steps
        .iter()
        .filter(|st| st.decision == Decision::Kept)
        .flat_map(|st| &st.edits)
        .collect();
    if kept.is_empty() {
        o.push_str("<p>No change kept: the server runs its original config.</p>");
    } else {
        o.push_str("<p>Kept, and live now:</p><ul>");
        for e in kept {
            let _ = write!(o, "<li>{}</li>", esc(&edit_line(e)));
        }
        o.push_str("</ul>");
    }
    if let Some(last) = s
        .steps
        .iter()
        .rev()
        .filter(|st| st.decision == Decision::Kept)
        .find_map(|st| st.pairs.last())
    {
        let _ = write!(
            o,
            "<p>The last kept change's last pair: {} {:.1} before, {:.1} after.</p>",
            esc(&s.objective),
            last.old.objective,
            last.new.objective
        );
    }
    if !s.restore_commands.is_empty() {
        let _ = write!(
            o,
            "<p>sysctls left changed; to put them back:</p><pre>{}</pre>",
            esc(&s.restore_commands.join("\n"))
        );
    }
    if let Some(sig) = &s.interrupted {
        let _ = write!(
            o,
            "<p><b>Interrupted by {}</b>: the original config was put back.</p>",
            esc(sig)
        );
    }
}
