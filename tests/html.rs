//! The HTML report: one self-contained file that fetches nothing, with the findings
//! beside their evidence and the charts, rendered from a saved Run (`report --html`)
//! and from a fresh one (`run --html`); opened in a real browser (headless Chromium)
//! where one is installed.

mod common;

use std::path::Path;

use common::{loadlens, Nginx};

fn fixture(name: &str) -> String {
    format!("{}/tests/data/runs/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

/// Asserts the page is whole and self-contained, and returns it.
fn self_contained(path: &Path) -> String {
    let html = std::fs::read_to_string(path).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>"),
        "{}",
        &html[..80.min(html.len())]
    );
    assert!(html.trim_end().ends_with("</html>"));
    for external in [
        "src=",
        "href=\"http",
        "<script src",
        "<link",
        "url(",
        "@import",
        "fetch(",
        "XMLHttpRequest",
    ] {
        // The one `src=` allowed is the flame graph, inline as a data: URL.
        let allowed = html.matches("src=\"data:").count();
        let n = html.matches(external).count();
        assert!(
            n == 0 || (external == "src=" && n == allowed),
            "the page fetches something: {external}"
        );
    }
    // One inline script (the table sorter), nothing else.
    assert!(html.matches("<script").count() <= 1);
    assert!(html.len() < 300_000, "{} bytes", html.len());
    html
}

/// The chart titled `title` (its SVG), asserted present.
fn chart<'a>(html: &'a str, title: &str) -> &'a str {
    let at = html
        .find(&format!("aria-label=\"{title}"))
        .unwrap_or_else(|| panic!("no chart {title}"));
    let end = at + html[at..].find("</svg>").unwrap();
    &html[at..end]
}

/// Asserts the chart titled `title` has at least `lines` lines, each drawn through
/// several points, and that they are not all at zero (they carry data): returns the lines'
/// point lists.
fn drawn(html: &str, title: &str, lines: usize) -> Vec<Vec<(f64, f64)>> {
    let svg = chart(html, title);
    let polylines: Vec<Vec<(f64, f64)>> = svg
        .split("points=\"")
        .skip(1)
        .map(|p| {
            p[..p.find('"').unwrap()]
                .split(' ')
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect();
    assert!(polylines.len() >= lines, "{title}: {svg}");
    for p in &polylines {
        assert!(p.len() >= 2, "{title}: a line of one point: {svg}");
    }
    // The x axis is at y = 184 in the chart's 220-high box: some line rises off it.
    let top = polylines
        .iter()
        .flatten()
        .map(|p| p.1)
        .fold(f64::MAX, f64::min);
    assert!(top < 174.0, "{title}: every line on the axis: {svg}");
    polylines
}

/// Runs `loadlens ARGS --html FILE`, asserts it succeeded (`report` printing nothing), and
/// returns the page (checked self-contained) and its path.
fn page(dir: &Path, args: &[&str]) -> (String, std::path::PathBuf) {
    let out = dir.join(format!("{}.html", args[0]));
    let st = loadlens()
        .args(args)
        .arg("--html")
        .arg(&out)
        .output()
        .unwrap();
    common::assert_ok(&st);
    if args[0] == "report" {
        assert!(
            st.stdout.is_empty(),
            "the page goes to the file, not stdout"
        );
    }
    (self_contained(&out), out)
}

#[test]
fn a_saved_run_renders_to_one_self_contained_page() {
    let dir = tempfile::tempdir().unwrap();
    let (html, out) = page(dir.path(), &["report", &fixture("time-wait-before")]);
    // The findings with their evidence and fix, the numbers, the charts.
    assert!(html.contains("new upstream connection per request, TIME_WAIT piling up"));
    assert!(html.contains("[time-wait-connect-cost, bottleneck"));
    assert!(html.contains("TIME_WAIT max: <b>"));
    assert!(html.contains("<b>Fix:</b> reuse upstream connections"));
    for (title, lines) in [
        ("requests/s and errors/s", 2),
        ("latency per second", 3),
        ("latency by percentile", 1),
        ("CPU, average of all CPUs", 3),
        ("TIME_WAIT sockets", 1),
        // A new upstream connection per request: the opens moved.
        ("TCP connections opened and accepted", 2),
    ] {
        drawn(&html, title, lines);
    }
    assert!(chart(&html, "TCP connections opened").contains(">opened<"));
    assert!(html.contains("Tcp.ActiveOpens</td>"), "the counters' table");
    if let Some(dom) = browser_dom(&out) {
        // Parsed by a real browser: the charts are SVG elements, the finding is text,
        // and the sorter ran (it titles the headers of every sortable table).
        assert!(dom.matches("<svg").count() >= 7, "{}", dom.len());
        assert!(dom.contains("TIME_WAIT piling up"));
        assert!(dom.contains("title=\"click to sort\""));
    }
}

#[test]
fn the_tcp_counters_that_moved_are_charted() {
    let dir = tempfile::tempdir().unwrap();
    let (html, _) = page(dir.path(), &["report", &fixture("listen-backlog-before")]);
    // The listen queue overflowed: drawn on its own scale, not dwarfed by the opens.
    let lines = drawn(&html, "TCP trouble counters that moved", 2);
    let svg = chart(&html, "TCP trouble counters that moved");
    assert!(svg.contains(">ListenOverflows<") && svg.contains(">ListenDrops<"));
    let top = lines[0].iter().map(|p| p.1).fold(f64::MAX, f64::min);
    assert!(
        top < 120.0,
        "ListenOverflows rises well above the axis: {svg}"
    );
    // Every counter that moved is listed below, with its change.
    assert!(
        html.contains("<td>TcpExt.ListenOverflows</td><td data-v=\"1969\">"),
        "{html}"
    );
}

#[test]
fn a_ceiling_search_renders_its_curve_objective_and_ceiling() {
    // A ceiling study built from recorded Runs (the curve is drawn from the steps, the
    // heat map and table from the cells' Runs): deterministic, no load.
    let run = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
    };
    let step = |rate: f64, p50: u64, p99: u64, met: bool, cell: usize| {
        serde_json::json!({"rate": rate, "achieved_per_s": rate * 0.99, "p50_us": p50,
            "p99_us": p99, "slo_value_us": p99, "errors_pct": 0.0, "met": met, "cell": cell})
    };
    let sweep = serde_json::json!({
        "schema_version": 1, "tool": "loadlens test", "interrupted": false,
        "dims": [],
        "cells": [
            {"coords": ["1000"], "run": run("healthy-before")},
            {"coords": ["2000"], "run": run("healthy-after")},
            {"coords": ["3000"], "run": run("time-wait-before")},
        ],
        "ceiling": {"slo": "p99<20ms", "errors": null, "met_rate": 2000.0, "broke_rate": 3000.0,
            "broke_because": "p99 36.45ms", "broke_finding": "time-wait-connect-cost: TIME_WAIT",
            "steps": [step(1000.0, 400, 900, true, 0), step(2000.0, 600, 4000, true, 1),
                step(3000.0, 1200, 36450, false, 2)],
            "stopped": "converged"},
    });
    let sweep: loadlens::run::Sweep = serde_json::from_value(sweep).unwrap();
    let html = String::from_utf8(loadlens::report::View::render(
        &loadlens::report::Html,
        &sweep,
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ceiling.html");
    std::fs::write(&out, &html).unwrap();
    let html = self_contained(&out);
    // p50 and p99 by rate, the objective's line at 20 ms and the ceiling at 2000/s.
    let lines = drawn(&html, "latency by scheduled rate", 2);
    assert_eq!(lines[0].len(), 3);
    let svg = chart(&html, "latency by scheduled rate");
    assert!(
        svg.contains(">objective p99&lt;20ms<") && svg.contains(">ceiling 2000/s<"),
        "{svg}"
    );
    let marks: Vec<&str> = svg.split("<line class=\"mark\"").skip(1).collect();
    assert_eq!(marks.len(), 2, "{svg}");
    // The ceiling's vertical line stands at the 2000/s step (the middle point in x).
    let x_of = |m: &str| -> f64 {
        let a = m.find("x1=\"").unwrap() + 4;
        m[a..a + m[a..].find('"').unwrap()].parse().unwrap()
    };
    assert!((x_of(marks[1]) - lines[0][1].0).abs() < 0.5, "{svg}");
    assert!(html.contains("Highest rate that met p99&lt;20ms: <b>2000 requests/s</b>"));
    // Every rate tried in the sortable table (a ceiling study has no dimensions: the
    // column is the rate), the fastest cell the greenest.
    assert!(
        html.contains("<th>rate</th><th>requests/s</th><th>p99</th>"),
        "{html}"
    );
    assert!(html.contains("<tr><td>2000</td><td data-v=\""));
    assert!(html.contains("hsl(120,70%,72%)"));
    if let Some(dom) = browser_dom(&out) {
        assert!(dom.contains("class=\"mark\"") && dom.contains("title=\"click to sort\""));
    }
}

#[test]
fn a_fresh_run_with_its_profile() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let url = ng.url("/1k.bin");
    let (html, _) = page(
        dir.path(),
        &[
            "run",
            &url,
            "-c",
            "8",
            "-t",
            "1",
            "-d",
            "2s",
            "--profile",
            "-q",
        ],
    );
    assert!(html.contains("Where the server's CPU went"));
    assert!(
        html.contains("data:image/svg+xml;base64,"),
        "the flame graph inline"
    );
    // The watched worker's row and the findings section, whatever was found.
    assert!(html.contains("<h2>Findings</h2>") && html.contains("nginx worker"));
}

#[test]
fn an_unwritable_html_file_fails_before_the_load() {
    let ng = Nginx::start("", "");
    let st = loadlens()
        .args([
            "run",
            &ng.url("/1k.bin"),
            "-d",
            "1s",
            "--html",
            "/nonexistent/dir/r.html",
        ])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&st.stderr).contains("HTML"));
    assert_eq!(ng.log().len(), 0);
}

#[test]
fn compare_and_sweep_render_to_pages_too() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = (fixture("time-wait-before"), fixture("time-wait-after"));
    let (html, out) = page(dir.path(), &["compare", &before, &after]);
    assert!(
        html.contains("requests/s") && html.contains("time-wait-connect-cost"),
        "{html}"
    );
    // Overlaid: one line per run in each chart, with both runs in the legend, beside
    // the side-by-side table.
    for title in [
        "latency by percentile, each run",
        "responses/s, second by second, each run",
        "p99 per second, each run",
    ] {
        assert_eq!(drawn(&html, title, 2).len(), 2, "{title}");
        let svg = chart(&html, title);
        assert!(
            svg.contains("[A] time-wait-before.json") && svg.contains("[B] time-wait-after.json")
        );
    }
    // The spectra differ: before's p99.9 is ~42 ms, after's ~1 ms (lower on screen = higher y).
    let spectra = drawn(&html, "latency by percentile, each run", 2);
    assert!(spectra[0].last().unwrap().1 < spectra[1].last().unwrap().1 - 50.0);
    assert!(html.contains(
        "<table class=\"sort\"><thead><tr><th>metric</th><th>[A]</th><th>[B]</th><th>change</th>"
    ));
    assert!(html.contains("<td>latency p99</td><td data-v=\""));
    if let Some(dom) = browser_dom(&out) {
        assert_eq!(dom.matches("<svg").count(), 3);
        assert!(dom.contains("title=\"click to sort\""));
    }

    let ng = Nginx::start("", "access_log off;");
    let url = ng.url("/1k.txt");
    let sweep = [
        "sweep", &url, "-c", "2,4", "-t", "1", "-d", "1s", "--pause", "100ms",
    ];
    let mut args = sweep.to_vec();
    args.extend(["--no-watch", "-q"]);
    let (html, out) = page(dir.path(), &args);
    assert!(html.contains("aria-label=\"requests/s by cell"), "{html}");
    assert_eq!(html.matches("<polyline").count(), 1);
    // The heat maps: by requests/s and by p99, a coloured cell per load; every cell in
    // the sortable table, coloured too.
    assert_eq!(html.matches("<table class=\"heat\">").count(), 2);
    assert!(html.contains("<th>-c 2</th><th>-c 4</th>"), "{html}");
    assert_eq!(
        html.matches("style=\"background:hsl(").count(),
        2 * 2 + 2 * 2
    );
    assert!(html.contains("<th>connections</th><th>requests/s</th><th>p99</th>"));
    if let Some(dom) = browser_dom(&out) {
        assert!(dom.contains("class=\"heat\"") && dom.contains("title=\"click to sort\""));
    }
}

/// A mixed Run's page (recorded against nginx with `--targets` by
/// `scripts/record-mix-runs.sh`): the endpoints' table, sortable, opened in a browser
/// with its console quiet; and the comparison of two mixed Runs, a row per endpoint and
/// number with its verdict.
#[test]
fn a_mixed_run_and_its_comparison_render_their_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = (fixture("mix-before"), fixture("mix-after"));
    let (html, out) = page(dir.path(), &["report", &before]);
    assert!(html.contains("<h2>Endpoints</h2>"), "{html}");
    for name in ["GET /1k.txt", "HEAD /1k.txt", "GET /missing", "post a form"] {
        assert!(html.contains(&format!("<tr><td>{name}</td>")), "{name}");
    }
    if let Some(dom) = browser_dom(&out) {
        assert!(dom.contains("<h2>Endpoints</h2>"));
        assert!(dom.contains("<td>post a form</td>"));
        assert!(dom.contains("title=\"click to sort\""));
    }
    let (html, out) = page(dir.path(), &["compare", &before, &after]);
    for name in ["GET /1k.txt", "HEAD /1k.txt", "GET /missing", "post a form"] {
        for metric in ["requests/s", "latency mean", "latency p99"] {
            assert!(
                html.contains(&format!("<tr><td>{name}: {metric}</td>")),
                "{name}: {metric}"
            );
        }
    }
    if let Some(dom) = browser_dom(&out) {
        assert!(dom.contains("GET /missing: latency p99"));
    }
}

/// The DOM as headless Chromium parsed it, when Chromium is installed (else
/// `SKIPPED`, a failure under `CI=true`); it also writes a screenshot for humans under
/// `target/` and asserts the console stayed quiet.
fn browser_dom(page: &Path) -> Option<String> {
    let Some(bin) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new("which")
                .arg(b)
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        common::skip_or_fail(
            "Chromium is not installed (scripts/install-deps.sh test installs it): the page was not opened in a browser",
        );
        return None;
    };
    let profile = tempfile::tempdir().unwrap();
    let chrome = |extra: &[String]| {
        std::process::Command::new(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--enable-logging=stderr",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .output()
            .unwrap()
    };
    let out = chrome(&["--dump-dom".to_string()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("CONSOLE"), "console messages: {err}");
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "target/loadlens-{}.png",
        page.file_stem().unwrap().to_string_lossy()
    ));
    let _ = chrome(&[
        "--window-size=1000,2400".to_string(),
        format!("--screenshot={}", shot.display()),
    ]);
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_sixty_second_profiled_run_is_a_small_page() {
    // A 60 s Run with a sample a second and a busy profile: a recorded 3 s Run stretched
    // to 60 s (its seconds and samples repeated) with 3000 distinct stacks 8 frames deep
    // drawn from a tree of 4 branches a level (deterministic). A real 60 s profiled run
    // against nginx renders to ~180 KB.
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("gzip-cpu-before")).unwrap())
            .unwrap();
    let stretch = |v: &mut serde_json::Value, key: &str, int: bool| {
        let a = v.as_array().unwrap().clone();
        *v = (0..60)
            .map(|t| {
                let mut s = a[t % a.len()].clone();
                s[key] = if int {
                    t.into()
                } else {
                    (t as f64 + 1.0).into()
                };
                s
            })
            .collect();
    };
    stretch(&mut run["results"]["timeline"], "t_s", true);
    stretch(&mut run["evidence"]["samples"], "t_s", false);
    run["results"]["duration_s"] = 60.0.into();
    let mut frames: Vec<String> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut stacks = Vec::new();
    let mut x: u64 = 12345;
    let pid = run["evidence"]["profile"]["top"]["pid"].clone();
    for _ in 0..3000 {
        let mut path = String::new();
        let mut ids = Vec::new();
        for depth in 0..8 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            path.push_str(&format!("/{}", (x >> 33) % 4));
            let id = *index.entry(path.clone()).or_insert_with(|| {
                frames.push(format!("ngx_http_some_long_function_name_{depth}_{path}"));
                frames.len() - 1
            });
            ids.push(id);
        }
        stacks.push(serde_json::json!({"pid": pid, "frames": ids, "count": 1 + (x >> 40) % 5}));
    }
    run["evidence"]["profile"]["frames"] = frames.into();
    run["evidence"]["profile"]["stacks"] = stacks.into();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run60.json");
    std::fs::write(&file, run.to_string()).unwrap();
    let (html, _) = page(dir.path(), &["report", file.to_str().unwrap()]);
    assert!(
        html.contains("data:image/svg+xml;base64,"),
        "the flame graph"
    );
    drawn(&html, "requests/s and errors/s", 2);
    let size = html.len();
    assert!(size < 300_000, "{size} bytes");
    eprintln!("a 60 s profiled Run: {size} bytes of HTML");
}

/// A run over HTTP/3 (`lab run udp-receive-buffer`'s, recorded): its QUIC numbers
/// (handshakes, packets sent and lost, RTT) and the server's UDP evidence (the
/// counters, Caddy's QUIC socket with its buffer and drops) are on the page, and its
/// phases name the QUIC handshake, with no TCP connect.
#[test]
fn an_http3_run_shows_its_quic_numbers_and_the_udp_evidence() {
    let path = fixture("udp-receive-buffer-before");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let q = &run["results"]["quic"];
    let dir = tempfile::tempdir().unwrap();
    let (html, _) = page(dir.path(), &["report", &path]);
    let section = html
        .split("<h2>HTTP/3 (QUIC)</h2>")
        .nth(1)
        .unwrap_or_else(|| panic!("no HTTP/3 section"));
    let section = section.split("<h2>").next().unwrap();
    for (label, value) in [
        ("packets sent", q["packets_sent"].to_string()),
        (
            "QUIC connections (handshakes completed)",
            run["results"]["connections_opened"].to_string(),
        ),
    ] {
        assert!(
            section.contains(&format!("<tr><td>{label}</td><td>{value}")),
            "{label} {value}: {section}"
        );
    }
    let lost = q["packets_lost"].as_u64().unwrap();
    assert!(lost > 0);
    assert!(
        section.contains(&format!("<td>{lost} (")),
        "{lost} lost: {section}"
    );
    assert!(section.contains("RTT the QUIC stack measured"));
    let phases = html.split("<h2>Phases</h2>").nth(1).unwrap();
    let phases = phases.split("</table>").next().unwrap();
    assert!(phases.contains("<td>QUIC handshake</td>") && !phases.contains("TCP connect"));
    let udp = html.split("<h2>UDP</h2>").nth(1).expect("no UDP section");
    let udp = udp.split("<h2>").next().unwrap();
    let sock = run["evidence"]["window"]["udp"]["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|s| s["drops"].as_u64())
        .unwrap();
    assert!(
        udp.contains(&format!("<td>{}</td>", sock["drops"])),
        "{}: {udp}",
        sock["drops"]
    );
    assert!(udp.contains("RcvbufErrors") && udp.contains("net.core.rmem_max = "));
}
