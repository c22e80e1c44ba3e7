//! `loadlens import har`: a hand-written HAR (`tests/data/hand-written-shop.har`, five
//! entries in the shape Chrome's DevTools save: HTTP/2 pseudo-headers, a query, a POST
//! with a body, a repeated Cookie) imported to exactly the expected targets lines; bad
//! HARs refused naming the entry; and the round trip: the targets run against real
//! nginx, whose own access log counts what loadlens counted per endpoint.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{assert_ok, loadlens, run_json, u, Nginx};
use serde_json::Value;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/hand-written-shop.har"
);

/// The fixture's targets, one line per entry, on `server` (`https://shop.example` as
/// recorded).
fn expected(server: &str) -> String {
    [
        r#"{"method":"GET","url":"S/","headers":{"accept":"text/html,application/xhtml+xml","accept-encoding":"gzip, deflate, br","cookie":"session=abc123; theme=dark","user-agent":"Mozilla/5.0 (X11; Linux x86_64)"}}"#,
        r#"{"method":"GET","url":"S/search?q=red+shoes&page=2","headers":{"accept":"application/json","cookie":"session=abc123; theme=dark","referer":"https://shop.example/"}}"#,
        r#"{"method":"POST","url":"S/api/cart","headers":{"Content-Type":"application/json","Cookie":"session=abc123","X-CSRF-Token":"t0k\"en"},"body":"{\"sku\":\"RS-42\",\"qty\":1}"}"#,
        r#"{"method":"GET","url":"S/static/app.css","headers":{"Accept":"text/css,*/*;q=0.1","Accept-Encoding":"gzip"}}"#,
        r#"{"method":"GET","url":"S/api/cart","headers":{"Accept":"application/json","Cookie":["session=abc123","cart=1"]}}"#,
    ]
    .iter()
    .map(|l| format!("{}\n", l.replace("\"url\":\"S/", &format!("\"url\":\"{server}/"))))
    .collect()
}

fn import(args: &[&str]) -> std::process::Output {
    loadlens()
        .args(["import", "har"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_fixture_imports_to_exactly_these_targets() {
    let out = import(&[FIXTURE]);
    assert_ok(&out);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        expected("https://shop.example")
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // -o FILE writes the same, and says how to run it.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("shop.jsonl");
    let out = import(&[FIXTURE, "-o", f.to_str().unwrap()]);
    assert_ok(&out);
    assert!(out.stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        expected("https://shop.example")
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("5 targets written to "), "{err}");
    assert!(err.contains("https://shop.example:443/"), "{err}");
}

#[test]
fn entries_on_another_server_are_kept_with_a_note() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let extra = r#"{"request": {"method": "GET", "url": "https://cdn.example/logo.png", "headers": []}},
      {"request": {"method": "GET", "url": "data:image/png;base64,AAAA", "headers": []}},
      {"request": {"method": "GET", "url": "https://cdn.example/app.js", "headers": []}}
    ]"#;
    let i = text.rfind(']').unwrap();
    let text = format!("{},\n{extra}{}", text[..i].trim_end(), &text[i + 1..]);
    let mut child = loadlens()
        .args(["import", "har", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 7, "{stdout}");
    assert!(stdout.starts_with(&expected("https://shop.example")));
    assert!(stdout.ends_with("{\"method\":\"GET\",\"url\":\"https://cdn.example/app.js\"}\n"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.contains("note: 1 entries skipped, not http or https: log.entries[6] data"),
        "{err}"
    );
    assert!(
        err.contains("note: 2 entries are on another server than the first entry's https://shop.example:443: log.entries[5] https://cdn.example:443, log.entries[7] https://cdn.example:443"),
        "{err}"
    );
    assert!(err.contains("must share the run's host"), "{err}");
}

#[test]
fn a_bad_har_exits_2_naming_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let entry = |url: &str| {
        format!(
            r#"{{"request": {{"method": "GET", {url} "headers": [{{"name": "Accept", "value": "*/*"}}]}}}}"#
        )
    };
    let bad = [
        (
            "{\"log\": {\"entries\": [".to_string(),
            ": not a HAR file: ",
        ),
        (
            "{\"log\": {\"version\": \"1.2\"}}".to_string(),
            ": no `log.entries`",
        ),
        (
            format!(
                r#"{{"log": {{"entries": [{}, {}, {}]}}}}"#,
                entry(r#""url": "http://a.test/","#),
                entry(r#""url": "http://a.test/b","#),
                entry("")
            ),
            ": log.entries[2]: the request has no `url`",
        ),
        (
            format!(
                r#"{{"log": {{"entries": [{}, {{"request": {{"url": "http://a.test/", "headers": [{{"name": "X", "value": "a\r\nEvil: 1"}}]}}}}]}}}}"#,
                entry(r#""url": "http://a.test/","#)
            ),
            ": log.entries[1]: invalid header",
        ),
    ];
    for (i, (text, want)) in bad.iter().enumerate() {
        let f = dir.path().join(format!("bad-{i}.har"));
        std::fs::write(&f, text).unwrap();
        let out = import(&[f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with(&format!("error: HAR file {}{want}", f.display())),
            "{text}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
}

/// nginx with the fixture's paths and a log of `METHOD|PATH|ARGS|COOKIE|CONTENT_LENGTH`.
fn nginx(dir: &Path) -> Nginx {
    let http = format!(
        "log_format har '$request_method|$uri|$args|$http_cookie|$content_length';\n    access_log {}/har.log har;",
        dir.display()
    );
    Nginx::start(
        &http,
        r#"location = / { return 200 "home"; }
           location = /search { return 200 "[]"; }
           location = /api/cart { return 200 "{}"; }
           location = /static/app.css { return 200 "a{}"; }"#,
    )
}

#[test]
fn imported_targets_run_and_nginx_sees_each_endpoint_as_counted() {
    let dir = tempfile::tempdir().unwrap();
    let ng = nginx(dir.path());
    let base = ng.url("");
    let har = dir.path().join("local.har");
    std::fs::write(
        &har,
        std::fs::read_to_string(FIXTURE)
            .unwrap()
            .replace("https://shop.example/", &format!("{base}/")),
    )
    .unwrap();
    let targets = dir.path().join("local.jsonl");
    let out = import(&[har.to_str().unwrap(), "-o", targets.to_str().unwrap()]);
    assert_ok(&out);
    // Only the URLs changed (and the Referer header, rewritten with them).
    assert_eq!(
        std::fs::read_to_string(&targets).unwrap(),
        expected(&base).replace(
            "\"referer\":\"https://shop.example/\"",
            &format!("\"referer\":\"{base}/\"")
        )
    );
    let run = run_json(&[
        "-n",
        "100",
        "-c",
        "4",
        "-t",
        "1",
        "--sequential",
        "--no-watch",
        "--targets",
        targets.to_str().unwrap(),
        &ng.url("/"),
    ]);
    assert_eq!(u(&run, "results.responses"), 100);
    ng.log(); // waits until nginx has logged every request
    let log = std::fs::read_to_string(dir.path().join("har.log")).unwrap();
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for l in log.lines() {
        let f: Vec<&str> = l.split('|').collect();
        *seen.entry(format!("{} {}", f[0], f[1])).or_insert(0) += 1;
        match (f[0], f[1]) {
            ("GET", "/") => assert_eq!(f[3], "session=abc123; theme=dark", "{l}"),
            ("GET", "/search") => assert_eq!(f[2], "q=red+shoes&page=2", "{l}"),
            ("POST", "/api/cart") => assert_eq!((f[3], f[4]), ("session=abc123", "23"), "{l}"),
            _ => {}
        }
    }
    let counted: BTreeMap<String, u64> = run["results"]["endpoints"]
        .as_array()
        .expect("results.endpoints")
        .iter()
        .map(|e: &Value| (e["name"].as_str().unwrap().to_string(), u(e, "responses")))
        .collect();
    let want: BTreeMap<String, u64> = [
        "GET /",
        "GET /search",
        "POST /api/cart",
        "GET /static/app.css",
        "GET /api/cart",
    ]
    .iter()
    .map(|n| (n.to_string(), 20))
    .collect();
    assert_eq!(seen, want, "nginx's log");
    assert_eq!(counted, want, "loadlens's endpoints");
}
