//! The flame graph of a Run's profile: an SVG drawn by inferno from the folded stacks,
//! one root per server process kind (`nginx (front)`, `php-fpm8.2 (upstream)`). It
//! opens in any browser, with inferno's search and zoom, and needs no network.

use std::path::Path;

use anyhow::Context;

use crate::run::{Evidence, Profile, Run, Tier};

/// The SVG of `run`'s profile. Err when the Run holds no profile or no samples.
pub fn svg(run: &Run) -> anyhow::Result<Vec<u8>> {
    draw(run, false)
}

/// The flame graph as an image inside the HTML report: no script (an `<img>` runs
/// none) and no frame narrower than 2 px of its 1200 (0.17% of the samples: too narrow
/// to read in a picture), which bounds its size whatever the number of distinct stacks.
pub fn inline_svg(run: &Run) -> anyhow::Result<Vec<u8>> {
    draw(run, true)
}

/// The off-CPU flame graph as an image inside the HTML report: the stacks the server's
/// threads blocked in, each as wide as the time it spent there.
pub fn offcpu_inline_svg(run: &Run) -> anyhow::Result<Vec<u8>> {
    let ev = run
        .evidence
        .as_ref()
        .context("the Run has no evidence (--no-watch)")?;
    let off = ev.offcpu.as_ref().context("the Run has no off-CPU watch")?;
    if off.profile.samples == 0 {
        anyhow::bail!("the server's threads never blocked");
    }
    let opts = Drawing {
        title: format!("Where the server's threads blocked: {}", run.spec.url),
        subtitle: format!(
            "microseconds off CPU, blocked in a call, over {:.1} s",
            off.duration_s
        ),
        count_name: "µs",
        inline: true,
    };
    draw_profile(ev, &off.profile, opts)
}

/// How to draw a profile.
struct Drawing {
    title: String,
    subtitle: String,
    count_name: &'static str,
    inline: bool,
}

fn draw(run: &Run, inline: bool) -> anyhow::Result<Vec<u8>> {
    let ev = run
        .evidence
        .as_ref()
        .context("the Run has no evidence (--no-watch)")?;
    let p = ev
        .profile
        .as_ref()
        .context("the Run has no profile (see its warnings: perf events may not be permitted)")?;
    if p.samples == 0 {
        anyhow::bail!("the profile holds no samples: the server did not run on a CPU");
    }
    let opts = Drawing {
        title: format!("Where the server's CPU went: {}", run.spec.url),
        subtitle: format!(
            "{} samples at {} Hz per thread over {:.1} s{}",
            p.samples,
            p.frequency_hz,
            ev.window.duration_s,
            if p.kernel { "" } else { " (user frames only)" }
        ),
        count_name: "samples",
        inline,
    };
    draw_profile(ev, p, opts)
}

fn draw_profile(ev: &Evidence, p: &Profile, d: Drawing) -> anyhow::Result<Vec<u8>> {
    let label = |pid: i32| {
        ev.topology
            .processes
            .iter()
            .find(|s| s.pid == pid)
            .map(|s| {
                format!(
                    "{} ({})",
                    s.comm,
                    if s.tier == Tier::Unknown {
                        Tier::Front
                    } else {
                        s.tier
                    }
                )
            })
            .unwrap_or_else(|| format!("pid {pid}"))
    };
    let lines = p.folded(label);
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = d.title;
    opts.subtitle = Some(d.subtitle);
    opts.count_name = d.count_name.into();
    // The same Run draws the same picture (frame colours hashed from names, not random).
    opts.deterministic = true;
    if d.inline {
        opts.no_javascript = true;
        opts.min_width = 2.0;
    }
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
        .context("drawing the flame graph")?;
    Ok(out)
}

/// Writes the flame graph of `run` to `path`.
pub fn write(run: &Run, path: &Path) -> anyhow::Result<()> {
    let svg = svg(run)?;
    std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))
}
