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
    if let Some((mix, r)) = run
        .spec
        .mix
        .as_ref()
        .and_then(|m| Some((m, m.replay.as_ref()?)))
    {
        let _ = writeln!(
            o,
            "Replayed {}: {} requests over {:.1}s of log, {}{}",
            mix.file,
            r.requests,
            r.span_s,
            r.speed
                .map_or("as fast as possible".to_string(), |f| format!(
                    "at ×{f} its pace"
                )),
            if r.skipped_with_body > 0 {
                format!(
                    " ({} with a body skipped: the log does not hold it)",
                    r.skipped_with_body
                )
            } else {
                String::new()
            }
        );
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::test_endpoint;

    fn mixed_run() -> Run {
        let path = format!(
            "{}/tests/data/runs/healthy-before.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut run = Run::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        run.results.endpoints = vec![
            // 3 × 1 ms = 3 ms in all.
            test_endpoint("GET /many-fast", &[1000, 1000, 1000]),
            // 1 × 10 ms: the most time, though the fewest requests.
            test_endpoint("POST /one-slow", &[10_000]),
            test_endpoint("GET /<b>", &[500]),
        ];
        run
    }

    #[test]
    fn the_table_is_sorted_by_total_time() {
        let text = render(&mixed_run());
        let rows: Vec<&str> = text.lines().skip(2).collect();
        assert!(rows[0].trim_start().starts_with("POST /one-slow"), "{text}");
        assert!(rows[1].trim_start().starts_with("GET /many-fast"), "{text}");
        assert!(rows[2].trim_start().starts_with("GET /<b>"), "{text}");
        // Shares of 13.5 ms: 10/13.5, 3/13.5.
        assert!(rows[0].ends_with("74.1%"), "{text}");
        assert!(rows[1].ends_with("22.2%"), "{text}");
    }

    #[test]
    fn a_run_of_one_request_has_no_table_and_names_are_escaped_in_html() {
        let mut run = mixed_run();
        let mut o = String::new();
        html(&mut o, &run);
        assert!(o.contains("<td>GET /&lt;b&gt;</td>"), "{o}");
        run.results.endpoints.clear();
        assert_eq!(render(&run), "");
        let mut o = String::new();
        html(&mut o, &run);
        assert!(o.is_empty());
    }
}
