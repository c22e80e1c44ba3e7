//! Golden files for the views of the recorded Runs (`tests/data/runs/*.json`, the lab's
//! before/after runs): a change to any view shows up as a diff of a snapshot under
//! `tests/snapshots/`, reviewed and committed with the change.
//!
//! For every recorded Run: the terminal view (what `loadlens report RUN.json` prints)
//! and the HTML page (`loadlens report RUN.json --html FILE`); for every before/after
//! pair: the comparison table (`loadlens compare BEFORE AFTER`) and its HTML page
//! (`--html FILE`). The page's "terminal report" block is `report --latency`'s text, so
//! the percentiles and details are pinned there. Pure rendering through the library (`loadlens::report`), a few
//! milliseconds a view; `cli_drives_the_same_views` checks that the binary prints the
//! same bytes, so the snapshots are what a user sees.
//!
//! To bless a reviewed change (or a re-recorded Run), rerun with insta writing the
//! snapshots, then read `git diff tests/snapshots/` before committing:
//!
//! ```text
//! INSTA_UPDATE=always cargo test --test golden_views
//! ```
//!
//! (`cargo insta review` does the same interactively where cargo-insta is installed.)
//! Without it, a mismatch fails and leaves the new rendering beside the old as
//! `*.snap.new` (not under `CI=true`, where insta writes nothing). A Run added to
//! `tests/data/runs/` needs its snapshots blessed; one removed leaves stale snapshots,
//! which `no_stale_snapshots` names.
//!
//! Findings are rendered as the Run holds them. `loadlens report` diagnoses a Run saved
//! without findings again (the rules are pure functions of the Run); here that is not
//! done, so these files pin the views alone and a change to a rule does not touch them
//! (`tests/diagnose_recorded.rs` pins the diagnosis). The Runs recorded with findings
//! (apache-workers, fd-limit, gzip-cpu, haproxy-maxconn, php-fpm-socket,
//! worker-connections) exercise the findings' views; the others show "nothing stood out".
//! `mix-before`/`mix-after` are not the lab's: a `--targets` mix against nginx recorded by
//! `scripts/record-mix-runs.sh` (a new connection per request, then keep-alive; three
//! repetitions each), for the views per endpoint and `compare`'s rows per endpoint.
//!
//! What is not the Run's data, and how it is made deterministic (nothing else is
//! redacted: the tool version, start time, addresses and pids shown come from the
//! recorded file, not from this machine):
//! - the HTML page's inline CSS and sort script (`<style>`, `<script>`, consts in
//!   `src/report/html.rs`, reviewed as source) are replaced by a marker;
//! - the flame graph (`<img src="data:image/svg+xml;base64,…">`, drawn by inferno) is
//!   decoded into the snapshot so its frames can be read in a diff, with the frames'
//!   colours redacted: inferno picks each frame's colour at random
//!   (`Options::deterministic` is not set), so they differ from one rendering to the next;
//! - each page is cut into lines at `><` (a newline between two tags) so a diff shows the
//!   element that changed rather than one line of 100 kB; `html_lines` first checks the
//!   page has no newline of its own between two tags, so the cut loses nothing.
//!
//! Nothing here reads the terminal: the views take no width or colour from the
//! environment, and the binary in `cli_drives_the_same_views` runs with `NO_COLOR=1`,
//! `COLUMNS=80` and `TERM=dumb` set so that it could not either.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use assert_cmd::Command;
use base64::Engine as _;
use loadlens::compare::compare;
use loadlens::report::compare::CompareText;
use loadlens::report::html::CompareHtml;
use loadlens::report::{Html, Text, View};
use loadlens::run::{Comparison, Run};

/// The directory of the recorded Runs.
fn runs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/runs")
}

fn load(path: &Path) -> Run {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    Run::from_json(&text).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
}

/// The name of a recorded Run (`healthy-before` for `tests/data/runs/healthy-before.json`).
fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// The label `loadlens compare` gives a Run: the path as given on the command line
/// (`tests/data/runs/NAME.json` from the repository's root), not this machine's path.
fn label(path: &Path) -> String {
    format!("tests/data/runs/{}.json", stem(path))
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("a view renders UTF-8")
}

fn terminal_view(run: &Run) -> String {
    text(Text { latency: false }.render(run))
}

fn html_view(run: &Run) -> String {
    html_lines(&text(Html.render(run)))
}

/// The after-Run of a before-Run's path, if recorded.
fn after_of(before: &Path) -> Option<PathBuf> {
    let name = stem(before);
    let after = before.with_file_name(format!("{}-after.json", name.strip_suffix("-before")?));
    after.exists().then_some(after)
}

/// The comparison of a before/after pair, as `loadlens compare BEFORE AFTER` builds it.
fn comparison(before: &Path, after: &Path) -> (Comparison, Vec<Run>) {
    let runs = vec![(label(before), load(before)), (label(after), load(after))];
    let c = compare(&runs);
    (c, runs.into_iter().map(|(_, r)| r).collect())
}

/// Replaces the contents of every `<open…>…</close>` element with `marker`.
fn replace_elements(page: &str, open: &str, close: &str, marker: &str) -> String {
    let mut out = String::with_capacity(page.len());
    let mut rest = page;
    while let Some(i) = rest.find(open) {
        let Some(gt) = rest[i..].find('>') else { break };
        let body = i + gt + 1;
        let end = body
            + rest[body..]
                .find(close)
                .unwrap_or_else(|| panic!("{open} without {close}"));
        out.push_str(&rest[..body]);
        out.push_str(marker);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Inferno's random frame colours, in each frame's `<rect … fill="rgb(227,110,6)" …/>`
/// → `fill="rgb(…)"` (the title's and other text's fixed colours stay).
fn redact_frame_colours(svg: &str) -> String {
    const FILL: &str = "fill=\"rgb(";
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(i) = rest.find("<rect ") {
        let tag_end = i + rest[i..].find('>').expect("<rect without >");
        let Some(f) = rest[i..tag_end].find(FILL) else {
            out.push_str(&rest[..tag_end]);
            rest = &rest[tag_end..];
            continue;
        };
        let body = i + f + FILL.len();
        let end = body + rest[body..].find(')').expect("rgb( without )");
        out.push_str(&rest[..body]);
        out.push('…');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Each inline SVG image (`src="data:image/svg+xml;base64,…"`, the flame graph) decoded,
/// its colours redacted.
fn decode_svg_images(page: &str) -> String {
    const OPEN: &str = "src=\"data:image/svg+xml;base64,";
    let mut out = String::with_capacity(page.len() * 2);
    let mut rest = page;
    while let Some(i) = rest.find(OPEN) {
        let body = i + OPEN.len();
        let end = body + rest[body..].find('"').expect("unterminated src");
        let svg = base64::engine::general_purpose::STANDARD
            .decode(&rest[body..end])
            .expect("the inline image is base64");
        let svg = String::from_utf8(svg).expect("the inline SVG is UTF-8");
        out.push_str(&rest[..i]);
        out.push_str("src=\"data:image/svg+xml;base64,[decoded, colours redacted:]\n");
        out.push_str(&redact_frame_colours(&svg));
        out.push_str("\n[end of image]");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A page as its snapshot holds it: static assets replaced by markers, the flame graph
/// decoded, one line per tag.
fn html_lines(page: &str) -> String {
    let page = replace_elements(
        page,
        "<style",
        "</style>",
        "[CSS: src/report/html.rs STYLE]",
    );
    let page = replace_elements(
        &page,
        "<script",
        "</script>",
        "[JS: src/report/html.rs SCRIPT]",
    );
    let page = decode_svg_images(&page);
    // Cut at `><` only if the page has no newline of its own there (else a newline
    // added between two tags would not show in the snapshot).
    assert!(
        !page.contains(">\n<"),
        "the page has a newline between two tags: the snapshot's cut at `><` would hide it"
    );
    page.replace("><", ">\n<")
}

/// insta counts a `glob!`'s failures on one stack for the whole process: two `glob!`s
/// running at once (tests run in parallel threads) would report each other's failures.
/// Each test holding a `glob!` takes this lock first (poisoned by a failed test: still
/// usable).
static GLOB: Mutex<()> = Mutex::new(());

fn one_glob_at_a_time() -> MutexGuard<'static, ()> {
    GLOB.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn terminal() {
    let _serial = one_glob_at_a_time();
    insta::glob!("data/runs/*.json", |path| {
        insta::assert_snapshot!(terminal_view(&load(path)));
    });
}

#[test]
fn html() {
    let _serial = one_glob_at_a_time();
    insta::glob!("data/runs/*.json", |path| {
        insta::assert_snapshot!(html_view(&load(path)));
    });
}

#[test]
fn compare_terminal() {
    let _serial = one_glob_at_a_time();
    insta::glob!("data/runs/*-before.json", |before| {
        let after = after_of(before).expect("every before-Run has its after-Run");
        let (c, _) = comparison(before, &after);
        insta::assert_snapshot!(text(CompareText.render(&c)));
    });
}

#[test]
fn compare_html() {
    let _serial = one_glob_at_a_time();
    insta::glob!("data/runs/*-before.json", |before| {
        let after = after_of(before).expect("every before-Run has its after-Run");
        let (c, runs) = comparison(before, &after);
        insta::assert_snapshot!(html_lines(&text(CompareHtml { runs }.render(&c))));
    });
}

/// Two renderings from two reads of each Run are the same bytes (after the redactions
/// above): insta would catch a view that changes between runs only by chance.
#[test]
fn views_are_deterministic() {
    for path in recorded_runs() {
        assert_eq!(
            terminal_view(&load(&path)),
            terminal_view(&load(&path)),
            "{}",
            path.display()
        );
        assert_eq!(
            html_view(&load(&path)),
            html_view(&load(&path)),
            "{}",
            path.display()
        );
    }
}

fn recorded_runs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(runs_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    assert!(
        !v.is_empty(),
        "no recorded Runs in {}",
        runs_dir().display()
    );
    v
}

/// The library calls above are what the binary runs: `loadlens report` and `loadlens
/// compare` print the same bytes, for Runs recorded with their findings (for the
/// others `report` diagnoses again, see the header). fd-limit has no profile, so its
/// HTML has no randomly coloured flame graph and can be compared byte for byte.
#[test]
fn cli_drives_the_same_views() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let before = runs_dir().join("fd-limit-before.json");
    let after = runs_dir().join("fd-limit-after.json");
    let (b, a) = (load(&before), load(&after));
    assert!(
        !b.findings.is_empty() && !a.findings.is_empty(),
        "fd-limit's Runs are recorded with findings"
    );
    let cmd = || {
        let mut c = Command::cargo_bin("loadlens").unwrap();
        c.current_dir(root)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "80")
            .env("TERM", "dumb");
        c
    };

    let out = cmd().args(["report", &label(&before)]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text(out.stdout), terminal_view(&b));

    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let out = cmd()
        .args(["report", &label(&before), "--html"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&page).unwrap(), Html.render(&b));

    let out = cmd()
        .args(["compare", &label(&before), &label(&after)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (c, runs) = comparison(&before, &after);
    assert_eq!(text(out.stdout), text(CompareText.render(&c)));

    let page = dir.path().join("compare.html");
    let out = cmd()
        .args(["compare", &label(&before), &label(&after), "--html"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&page).unwrap(),
        CompareHtml { runs }.render(&c)
    );
}

/// Every snapshot belongs to a recorded Run (or pair) still there: a Run removed or
/// renamed must take its snapshots with it.
#[test]
fn no_stale_snapshots() {
    let runs: Vec<String> = recorded_runs().iter().map(|p| stem(p)).collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return; // nothing blessed yet: the snapshot tests fail on their own
    };
    let mut stale = Vec::new();
    for e in entries {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        // `*.snap.new` are renderings waiting for review, not snapshots.
        let Some(rest) = name
            .strip_prefix("golden_views__")
            .filter(|_| name.ends_with(".snap"))
        else {
            continue;
        };
        let run = rest
            .split_once('@')
            .and_then(|(_, r)| r.strip_suffix(".json.snap"));
        if !run.is_some_and(|r| runs.iter().any(|x| x == r)) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "snapshots of no recorded Run in {} (delete them): {stale:?}",
        dir.display()
    );
}
