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
        "src=\"http",
        "href=\"http",
        "<script",
        "<link",
        "url(http",
        "@import",
    ] {
        assert!(
            !html.contains(external),
            "the page fetches something: {external}"
        );
    }
    assert!(html.len() < 300_000, "{} bytes", html.len());
    html
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
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
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
    for chart in [
        "requests/s and errors/s",
        "latency per second",
        "latency by percentile",
        "CPU, average of all CPUs",
        "TIME_WAIT sockets",
    ] {
        assert!(
            html.contains(&format!("aria-label=\"{chart}")),
            "no chart {chart}"
        );
    }
    if let Some(dom) = browser_dom(&out) {
        // Parsed by a real browser: the charts are SVG elements, the finding is text.
        assert!(dom.matches("<svg").count() >= 5, "{}", dom.len());
        assert!(dom.contains("TIME_WAIT piling up"));
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
    let (html, _) = page(dir.path(), &["compare", &before, &after]);
    assert!(
        html.contains("requests/s") && html.contains("time-wait-connect-cost"),
        "{html}"
    );

    let ng = Nginx::start("", "access_log off;");
    let url = ng.url("/1k.txt");
    let sweep = [
        "sweep", &url, "-c", "2,4", "-t", "1", "-d", "1s", "--pause", "100ms",
    ];
    let mut args = sweep.to_vec();
    args.extend(["--no-watch", "-q"]);
    let (html, _) = page(dir.path(), &args);
    assert!(html.contains("aria-label=\"requests/s by cell"), "{html}");
    assert_eq!(html.matches("<polyline").count(), 1);
}

/// The DOM as headless Chromium parsed it, when Chromium is installed; it also writes
/// a screenshot for humans under `target/` and asserts the console stayed quiet.
fn browser_dom(page: &Path) -> Option<String> {
    let bin = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new("which")
                .arg(b)
                .output()
                .is_ok_and(|o| o.status.success())
        })?;
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
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/loadlens-report.png");
    let _ = chrome(&[
        "--window-size=1000,2400".to_string(),
        format!("--screenshot={}", shot.display()),
    ]);
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}
