//! Results per endpoint of a `--targets` mix: a table sorted by the total time each
//! endpoint took (responses × mean latency — where the server's time went, the order
//! an access-log profiler such as pt-query-digest uses), in the terminal and the HTML
//! page.

use std::fmt::Write as _;

use super::chart::esc;
use crate::run::{EndpointResult, Run};
use crate::units::fmt_us;

/// The endpoints, most total time first (ties: by name).
fn by_total_time(run: &Run) -> Vec<&EndpointResult> {
    let mut v: Vec<&EndpointResult> = run.results.endpoints.iter().collect();
    v.sort_by(|a, b| {
        b.total_us()
            .total_cmp(&a.total_us())
            .then_with(|| a.name.cmp(&b.name))
    });
    v
}

/// Responses whose status is not 2xx or 3xx.
fn non_2xx_3xx(e: &EndpointResult) -> u64 {
    e.status_codes
        .iter()
        .filter(|(c, _)| !(200..400).contains(*c))
        .map(|(_, n)| n)
        .sum()
}

/// Share of all endpoints' total time, %.
fn share_pct(e: &EndpointResult, all: f64) -> f64 {
    if all > 0.0 {
        100.0 * e.total_us() / all
    } else {
        0.0
    }
}

/// The terminal table; empty for a run of one request.
pub fn render(run: &Run) -> String {
    let eps = by_total_time(run);
    if eps.is_empty() {
        return String::new();
    }
    let all: f64 = eps.iter().map(|e| e.total_us()).sum();
    let width = eps
        .iter()
        .map(|e| e.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(8, 40);
    let mut o = String::new();
    let _ = writeln!(o, "Endpoints (by total time = responses × mean latency)");
    let _ = writeln!(
        o,
        "  {:<width$}{:>9}{:>8}{:>9}{:>9}{:>9}{:>9}{:>7}",
        "endpoint", "requests", "errors", "non-2xx", "mean", "p50", "p99", "time"
    );
    for e in eps {
        let at = |q| fmt_us(e.latency.at(q).unwrap_or(0) as f64);
        let name: String = e.name.chars().take(width).collect();
        let _ = writeln!(
            o,
            "  {name:<width$}{:>9}{:>8}{:>9}{:>9}{:>9}{:>9}{:>6.1}%",
            e.requests,
            e.errors,
            non_2xx_3xx(e),
            fmt_us(e.latency.mean_us),
            at(50.0),
            at(99.0),
            share_pct(e, all)
        );
    }
    o
}

/// The HTML table; nothing for a run of one request.
pub fn html(o: &mut String, run: &Run) {
    let eps = by_total_time(run);
    if eps.is_empty() {
        return;
    }
    let all: f64 = eps.iter().map(|e| e.total_us()).sum();
    o.push_str("<h2>Endpoints</h2><p>Sorted by total time (responses × mean latency).</p><table class=\"sort\"><thead><tr><th>endpoint</th><th>requests</th><th>errors</th><th>non-2xx/3xx</th><th>mean</th><th>p50</th><th>p99</th><th>max</th><th>time</th></tr></thead><tbody>");
    for e in eps {
        let at = |q| fmt_us(e.latency.at(q).unwrap_or(0) as f64);
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            esc(&e.name),
            e.requests,
            e.errors,
            non_2xx_3xx(e),
            fmt_us(e.latency.mean_us),
            at(50.0),
            at(99.0),
            fmt_us(e.latency.max_us as f64),
            share_pct(e, all)
        );
    }
    o.push_str("</tbody></table>");
}
