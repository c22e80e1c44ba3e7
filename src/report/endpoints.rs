//! Results per endpoint of a `--targets` mix: a table sorted by the total time each
//! endpoint took (responses × mean latency — where the server's time went, the order
//! an access-log profiler such as pt-query-digest uses), in the terminal and the HTML
//! page.

use std::fmt::Write as _;

use super::chart::esc;
use crate::run::{Cell, EndpointResult, Run, Sweep};
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
        if let Some(seg) = &run.segment {
            // Its places in the log's time order, from 1 (`spec/segment.rs#mix_share`).
            let (i, n) = (seg.index as u64, seg.count as u64);
            let sent = run.spec.requests.unwrap_or(0);
            let mut places: Vec<String> =
                (0..sent.min(3)).map(|j| (i + j * n).to_string()).collect();
            if sent > 3 {
                places.push("…".into());
            }
            let _ = writeln!(
                o,
                "Segment {i}/{n} of the replay: its requests {} ({sent} of {}), each at its time in the log",
                places.join(", "),
                r.requests
            );
        }
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

/// The endpoints of a study's cells (a sweep of a mix): each name with its result in
/// every cell, most total time over all the cells first; empty without a mix.
pub fn by_cell(cells: &[Cell]) -> Vec<(&str, Vec<Option<&EndpointResult>>)> {
    let mut rows: Vec<(&str, f64, Vec<Option<&EndpointResult>>)> = Vec::new();
    for (k, c) in cells.iter().enumerate() {
        for e in &c.run.results.endpoints {
            let at = match rows.iter().position(|r| r.0 == e.name) {
                Some(at) => at,
                None => {
                    rows.push((&e.name, 0.0, vec![None; cells.len()]));
                    rows.len() - 1
                }
            };
            rows[at].1 += e.total_us();
            rows[at].2[k] = Some(e);
        }
    }
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    rows.into_iter().map(|(n, _, v)| (n, v)).collect()
}

/// A cell's label in the endpoints' table: its coordinates as the study's table names
/// them (`-c 10`, `keep-alive`; a ceiling search's cells by rate), or its place.
fn cell_label(s: &Sweep, k: usize) -> String {
    let c = &s.cells[k];
    if c.coords.is_empty() {
        return format!("cell {}", k + 1);
    }
    c.coords
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let dim = s.dims.get(i).map_or("rate", |d| d.name.as_str());
            super::sweep::dim_label(dim, v)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The terminal table of a sweep of a mix: each endpoint's p99 and requests in each
/// cell; empty without a mix.
pub fn sweep_text(s: &Sweep) -> String {
    let cells = &s.cells;
    let rows = by_cell(cells);
    if rows.is_empty() {
        return String::new();
    }
    let width = rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(8, 40);
    const W: usize = 22;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\nEndpoints: p99 (requests) in each cell, most total time first"
    );
    let _ = write!(o, "  {:<width$}", "endpoint");
    for k in 0..cells.len() {
        let _ = write!(o, "{:>W$}", cell_label(s, k));
    }
    let _ = writeln!(o);
    for (name, per) in rows {
        let name: String = name.chars().take(width).collect();
        let _ = write!(o, "  {name:<width$}");
        for e in per {
            let v = e.map_or("-".to_string(), |e| {
                let p99 = e.latency.at(99.0).map_or("-".into(), |v| fmt_us(v as f64));
                format!("{p99} ({})", e.requests)
            });
            let _ = write!(o, "{v:>W$}");
        }
        let _ = writeln!(o);
    }
    o
}

/// The HTML table of a sweep of a mix: a row per endpoint and cell; nothing without a
/// mix.
pub fn sweep_html(o: &mut String, s: &Sweep) {
    let rows = by_cell(&s.cells);
    if rows.is_empty() {
        return;
    }
    o.push_str("<h2>Endpoints</h2><p>Each endpoint in each cell, most total time over the study first.</p><table class=\"sort\"><thead><tr><th>endpoint</th><th>cell</th><th>requests</th><th>errors</th><th>non-2xx/3xx</th><th>mean</th><th>p50</th><th>p99</th><th>max</th></tr></thead><tbody>");
    for (name, per) in rows {
        for (k, e) in per.iter().enumerate() {
            let Some(e) = e else {
                continue;
            };
            let at = |q| fmt_us(e.latency.at(q).unwrap_or(0) as f64);
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(name),
                esc(&cell_label(s, k)),
                e.requests,
                e.errors,
                non_2xx_3xx(e),
                fmt_us(e.latency.mean_us),
                at(50.0),
                at(99.0),
                fmt_us(e.latency.max_us as f64),
            );
        }
    }
    o.push_str("</tbody></table>");
}

/// Responses whose status is not 2xx or 3xx (for the sweep's CSV).
pub(super) fn non_2xx_3xx_of(e: &EndpointResult) -> u64 {
    non_2xx_3xx(e)
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

    /// A replay's segment names its places in the log, as many as it has (at most three).
    #[test]
    fn a_replay_segment_says_which_requests_it_sent() {
        let log: String = (0..10)
            .map(|t| format!("{{\"t\": {t}, \"url\": \"/a\"}}\n"))
            .collect();
        let mut run = mixed_run();
        let mix = crate::spec::replay::from_text(log.as_bytes(), "l", &run.spec.url, None);
        run.spec.mix = Some(mix.unwrap());
        for (index, count, sent, want) in [
            (
                1,
                2,
                5,
                "Segment 1/2 of the replay: its requests 1, 3, 5, … (5 of 10),",
            ),
            (
                4,
                4,
                2,
                "Segment 4/4 of the replay: its requests 4, 8 (2 of 10),",
            ),
        ] {
            run.spec.requests = Some(sent);
            run.segment = Some(crate::run::Segment {
                index,
                count,
                whole_connections: count,
                whole_requests: Some(10),
                whole_rate: None,
                start_at_unix_s: None,
                host: "h".into(),
            });
            let text = render(&run);
            assert!(text.lines().nth(1).unwrap().starts_with(want), "{text}");
        }
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

    #[test]
    fn a_sweep_of_a_mix_has_a_row_per_endpoint_and_a_column_per_cell() {
        let a = mixed_run();
        let mut b = mixed_run();
        b.results.endpoints.truncate(1);
        let s = Sweep {
            schema_version: crate::run::SWEEP_SCHEMA_VERSION,
            tool: "loadlens".into(),
            dims: vec![crate::run::Dim {
                name: "connections".into(),
                values: vec!["10".into(), "50".into()],
            }],
            cells: vec![
                Cell {
                    coords: vec!["10".into()],
                    run: a,
                },
                Cell {
                    coords: vec!["50".into()],
                    run: b,
                },
            ],
            ceiling: None,
            interrupted: false,
        };
        let text = sweep_text(&s);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].ends_with("-c 10                 -c 50"), "{text}");
        // Most total time over both cells first: /one-slow's 10 ms (one cell) before
        // /many-fast's 2 × 3 ms.
        assert!(
            lines[3].trim_start().starts_with("POST /one-slow"),
            "{text}"
        );
        assert!(
            lines[3].trim_end().ends_with('-'),
            "absent from the second cell: {text}"
        );
        assert!(
            lines[4].contains("(4)") && lines[4].ends_with("(4)"),
            "{text}"
        );
        let mut o = String::new();
        sweep_html(&mut o, &s);
        assert_eq!(o.matches("<tr><td>").count(), 4, "{o}");
        assert!(o.contains("<td>-c 50</td>"), "{o}");
    }
}
