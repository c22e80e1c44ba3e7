//! Small SVG line charts for the HTML report, drawn here rather than by a charting
//! library: a few hundred bytes per chart, no script, nothing fetched, and they print.

use std::fmt::Write;

const W: f64 = 720.0;
const H: f64 = 220.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 36.0;

/// One line: its name (legend), colour and points.
pub struct Series<'a> {
    pub name: &'a str,
    pub color: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// How the x axis is drawn.
#[derive(Clone, Copy)]
pub enum XAxis {
    /// Values with this unit after each label (`s` for seconds).
    Linear(&'static str),
    /// Percentiles on HdrHistogram's axis: x = 1/(1−p), labelled 50%, 90%, 99%, …
    Percentile,
}

/// A straight line across the chart at a value, with its label: an objective
/// (horizontal, a y value) or a point found on the x axis (vertical).
pub enum Mark<'a> {
    Y(f64, &'a str),
    X(f64, &'a str),
    /// A vertical mark that is a link (label, href): a change point to its Runs.
    XLink(f64, &'a str, &'a str),
}

/// A line chart of `series`. Empty string when there is nothing to draw.
pub fn lines(title: &str, y_unit: &str, x: XAxis, series: &[Series]) -> String {
    lines_marked(title, y_unit, x, series, &[])
}

/// A line chart of `series` with marks (dashed lines) across it. The y axis reaches
/// every horizontal mark, so an objective above the curve stays in sight.
pub fn lines_marked(
    title: &str,
    y_unit: &str,
    x: XAxis,
    series: &[Series],
    marks: &[Mark],
) -> String {
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if all.is_empty() {
        return String::new();
    }
    let tx = |v: f64| match x {
        XAxis::Linear(_) => v,
        XAxis::Percentile => (1.0 / (1.0 - (v / 100.0).min(0.999_999))).log10(),
    };
    let (mut x0, mut x1) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
        (a.min(tx(p.0)), b.max(tx(p.0)))
    });
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if let XAxis::Linear(_) = x {
        x0 = x0.min(0.0);
    }
    let mark_max = marks.iter().fold(0.0, |m, k| match k {
        Mark::Y(v, _) => f64::max(m, *v),
        Mark::X(..) | Mark::XLink(..) => m,
    });
    let ymax = nice(all.iter().map(|p| p.1).fold(mark_max, f64::max));
    let px = |v: f64| LEFT + (tx(v) - x0) / (x1 - x0) * (W - LEFT - RIGHT);
    let py = |v: f64| H - BOTTOM - v / ymax * (H - TOP - BOTTOM);
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{t}"><text x="{LEFT}" y="16" class="ct">{t}</text>"#,
        t = esc(title)
    );
    // Horizontal grid and y labels.
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let y = py(v);
        let _ = write!(
            o,
            r#"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" class="yl">{}</text>"#,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            esc(&label(v, y_unit))
        );
    }
    // X labels.
    let ticks: Vec<(f64, String)> = match x {
        XAxis::Linear(unit) => (0..=5)
            .map(|i| {
                let v = x0 + (x1 - x0) * i as f64 / 5.0;
                let digits = if x1 - x0 < 10.0 { 1 } else { 0 };
                (v, format!("{v:.digits$}{unit}"))
            })
            .collect(),
        XAxis::Percentile => [0.0, 50.0, 90.0, 99.0, 99.9, 99.99, 99.999]
            .iter()
            .filter(|p| tx(**p) <= x1 + 1e-9)
            .map(|p| (*p, format!("{p}%")))
            .collect(),
    };
    for (v, l) in ticks {
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{}" class="xl">{}</text>"#,
            px(v),
            H - BOTTOM + 16.0,
            esc(&l)
        );
    }
    for (i, s) in series.iter().enumerate() {
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
            .collect();
        let (lx, ly) = (W - RIGHT - 150.0, 6.0 + i as f64 * 14.0);
        let _ = write!(
            o,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.8" points="{}"/><rect x="{lx:.0}" y="{ly}" width="10" height="10" fill="{c}"/><text x="{:.0}" y="{}" class="lg">{}</text>"#,
            pts.join(" "),
            lx + 14.0,
            ly + 9.0,
            esc(s.name),
            c = s.color,
        );
    }
    for k in marks {
        let (x1, y1, x2, y2, l, anchor) = match k {
            Mark::Y(v, l) => (LEFT, py(*v), W - RIGHT, py(*v), l, "start"),
            Mark::X(v, l) | Mark::XLink(v, l, _) => (px(*v), TOP, px(*v), H - BOTTOM, l, "middle"),
        };
        let (lx, ly) = match k {
            Mark::Y(..) => (LEFT + 4.0, y1 - 3.0),
            Mark::X(..) | Mark::XLink(..) => (x1, TOP - 2.0),
        };
        let href = match k {
            Mark::XLink(_, _, h) => Some(h),
            _ => None,
        };
        if let Some(h) = href {
            // A wide transparent stroke under the dashed one: easier to click.
            let _ = write!(
                o,
                r##"<a href="{}"><title>{}</title><line x1="{x1:.1}" x2="{x2:.1}" y1="{y1:.1}" y2="{y2:.1}" stroke="transparent" stroke-width="12"/>"##,
                esc(h),
                esc(l)
            );
        }
        let _ = write!(
            o,
            r##"<line class="mark" x1="{x1:.1}" x2="{x2:.1}" y1="{y1:.1}" y2="{y2:.1}" stroke="#c0392b" stroke-dasharray="5 4"/><text x="{lx:.1}" y="{ly:.1}" class="lg" text-anchor="{anchor}">{}</text>"##,
            esc(l)
        );
        if href.is_some() {
            o.push_str("</a>");
        }
    }
    o.push_str("</svg>");
    o
}

/// The next "round" number at or above `v` (1, 2, 5 × 10^k).
fn nice(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let e = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * e)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * e)
}

fn label(v: f64, unit: &str) -> String {
    let s = if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    };
    format!("{s}{unit}")
}

/// Escapes text for HTML and SVG.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_one_svg_with_its_lines_and_escaped_text() {
        let s = lines(
            "p99 <ms>",
            "ms",
            XAxis::Linear("s"),
            &[Series {
                name: "a&b",
                color: "#c00",
                points: vec![(0.0, 1.0), (1.0, 3.0)],
            }],
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 1);
        assert!(s.contains("p99 &lt;ms&gt;") && s.contains("a&amp;b"));
        assert!(lines("x", "", XAxis::Linear("s"), &[]).is_empty());
        let m = lines_marked(
            "t",
            "ms",
            XAxis::Linear("/s"),
            &[Series {
                name: "p99",
                color: "#c00",
                points: vec![(100.0, 1.0), (200.0, 2.0)],
            }],
            &[Mark::Y(10.0, "objective"), Mark::X(150.0, "ceiling")],
        );
        assert_eq!(m.matches("class=\"mark\"").count(), 2);
        // The objective above the curve is inside the axis: the top label is 10 ms.
        assert!(m.contains(">10.0ms<"), "{m}");
        assert_eq!(nice(0.7), 1.0);
        assert_eq!(nice(130.0), 200.0);
    }
}
