//! "Where the server's time went": for each watched worker, its time on a CPU, waiting
//! for one, blocked in calls, and waiting for work, from the off-CPU watch; then what
//! it blocked in, most time first, and the long waits.

use std::fmt::Write as _;

use crate::run::{Evidence, OffClass, OffCpu, Role, STALL_MS};

/// Processes shown, and blocking calls.
const ROWS: usize = 8;
const CALLS: usize = 5;

/// The shares of each process's time, in the order of [`rows`]' arrays.
pub const COLUMNS: [&str; 5] = ["on CPU", "CPU wait", "blocked", "idle", "sleep"];

/// Per watched process (masters left out), its name and the shares of its time, percent
/// of its threads × the window: on a CPU, waiting for one, blocked in calls, idle
/// (waiting for work, or on a futex: a pool's idle threads), sleeping. Most blocked first. Empty without an off-CPU watch.
pub fn rows(e: &Evidence) -> Vec<(String, [f64; 5])> {
    let Some(off) = &e.offcpu else {
        return Vec::new();
    };
    let span_ms = off.duration_s * 1e3;
    let mut rows: Vec<(String, [f64; 5])> = e
        .window
        .processes
        .iter()
        .filter(|p| p.role != Role::Master && span_ms > 0.0)
        .filter_map(|p| {
            let o = off.processes.iter().find(|o| o.pid == p.pid)?;
            let threads = if o.threads > 0 {
                o.threads
            } else {
                p.threads as u32
            };
            let whole = span_ms * threads.max(1) as f64;
            let pct = |ms: f64| ms * 100.0 / whole;
            let blocked: f64 = OffClass::ALL
                .iter()
                .filter(|k| k.blocks() && **k != OffClass::Runnable)
                .map(|&k| o.of(k))
                .sum();
            let on = p.cpu_pct / p.threads.max(1) as f64;
            let shares = [
                on,
                pct(o.of(OffClass::Runnable)),
                pct(blocked),
                pct(o.of(OffClass::Idle) + o.of(OffClass::Futex)),
                pct(o.of(OffClass::Sleep)),
            ];
            Some((format!("{} {} {}", p.comm, p.role, p.pid), shares))
        })
        .collect();
    rows.sort_by(|a, b| b.1[2].total_cmp(&a.1[2]).then(b.1[0].total_cmp(&a.1[0])));
    rows
}

/// Where the numbers come from and what reading them cost: "2 threads over 3.2 s, from
/// their context switches; reading them took 0.2% of a core" (and switches lost).
pub fn source(off: &OffCpu) -> String {
    if let Some(hz) = off.sampled_hz {
        return format!(
            "{} threads over {:.1} s, their states sampled from /proc {hz} times a second (no stacks: --profile watches the context switches where perf is permitted); sampling took {:.1}% of a core",
            off.threads, off.duration_s, off.watch_cpu_pct
        );
    }
    format!(
        "{} threads over {:.1} s, from their context switches; reading them took {:.1}% of a core{}",
        off.threads,
        off.duration_s,
        off.watch_cpu_pct,
        if off.lost > 0 {
            format!("; {} switches lost", off.lost)
        } else {
            String::new()
        }
    )
}

/// The block, or nothing when the Run holds no off-CPU watch.
pub fn render(e: &Evidence) -> String {
    let mut o = String::new();
    let Some(off) = &e.offcpu else {
        return o;
    };
    let span_ms = off.duration_s * 1e3;
    if span_ms <= 0.0 {
        return o;
    }
    let _ = writeln!(o, "Where the server's time went ({}):", source(off));
    let _ = writeln!(
        o,
        "  {:<24} {:>7} {:>9} {:>8} {:>9} {:>7}",
        "process", COLUMNS[0], COLUMNS[1], COLUMNS[2], COLUMNS[3], COLUMNS[4]
    );
    for (who, s) in rows(e).iter().take(ROWS) {
        let _ = writeln!(
            o,
            "  {:<24} {:>6.1}% {:>8.1}% {:>7.1}% {:>8.1}% {:>6.1}%",
            who, s[0], s[1], s[2], s[3], s[4]
        );
    }
    let pids: Vec<i32> = e.window.processes.iter().map(|p| p.pid).collect();
    let calls: Vec<_> = off.blocking_waits(&pids).take(CALLS).collect();
    if !calls.is_empty() {
        let _ = writeln!(o, "  blocked in (most time first):");
    }
    for w in calls {
        let _ = writeln!(
            o,
            "    {:>7.0} ms  {} — pid {}, {} times, longest {:.0} ms",
            w.total_ms,
            w.describe(),
            w.pid,
            w.count,
            w.max_ms
        );
    }
    if !off.stalls.is_empty() {
        let at: Vec<String> = off
            .stalls
            .iter()
            .take(6)
            .map(|s| format!("{:.2} s ({:.0} ms)", s.t_s, s.ms))
            .collect();
        let _ = writeln!(
            o,
            "  waits ≥ {STALL_MS:.0} ms: {} — at {}{}",
            off.stalls.len(),
            at.join(", "),
            if off.stalls.len() > at.len() {
                ", …"
            } else {
                ""
            }
        );
    }
    o
}
