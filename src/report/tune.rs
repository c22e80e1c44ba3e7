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
