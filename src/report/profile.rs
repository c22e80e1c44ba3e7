//! "Where the server's CPU went": the top functions of the busiest worker from the
//! Run's profile, self and total share, kernel or user.

use std::fmt::Write;

use crate::run::Evidence;

/// Rows shown.
const SHOWN: usize = 10;

/// The block, or nothing when the Run holds no profile.
pub fn render(e: &Evidence) -> String {
    let mut o = String::new();
    let Some(p) = &e.profile else {
        return o;
    };
    let Some(top) = &p.top else {
        let _ = writeln!(
            o,
            "Where the server's CPU went: no samples (the server processes did not run on a CPU)"
        );
        return o;
    };
    let who = e
        .topology
        .processes
        .iter()
        .find(|s| s.pid == top.pid)
        .map(|s| format!("{} {} {}", s.comm, s.role, s.pid))
        .unwrap_or_else(|| format!("pid {}", top.pid));
    let _ =
        writeln!(
        o,
        "Where the server's CPU went ({who}: {} samples at {} Hz; kernel {:.0}%, user {:.0}%{}):",
        top.samples,
        p.frequency_hz,
        top.kernel_pct,
        top.user_pct,
        if p.kernel { "" } else { "; kernel frames not permitted" }
    );
    let _ = writeln!(o, "   self  total  where   function");
    for f in top.functions.iter().take(SHOWN) {
        let _ = writeln!(
            o,
            "  {:4.1}%  {:4.1}%  {:6}  {}",
            f.self_pct,
            f.total_pct,
            if f.kernel { "kernel" } else { "user" },
            f.name
        );
    }
    if p.lost > 0 {
        let _ = writeln!(o, "  ({} samples lost: ring buffer full)", p.lost);
    }
    o
}
