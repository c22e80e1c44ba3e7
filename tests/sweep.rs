//! `loadlens sweep` against real servers: a grid (one cell per requests-per-connection
//! value, each run with it), and a ceiling search against a php-fpm pool whose
//! capacity is known by construction (children ÷ script time).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{assert_ok, assert_valid, loadlens, u, Nginx, PhpFpm};
use serde_json::Value;

fn sweep(args: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    let csv = dir.path().join("sweep.csv");
    let out = loadlens()
        .arg("sweep")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    assert_ok(&out);
    let v = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_valid("sweep", &v);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    (v, text + &std::fs::read_to_string(&csv).unwrap())
}

#[test]
fn each_cell_runs_its_requests_per_connection() {
    let ng = Nginx::start("", "access_log off;");
    let (s, text) = sweep(&[
        &ng.url("/1k.txt"),
        "--connreqs",
        "1,8,keep-alive",
        "-c",
        "8",
        "-t",
        "1",
        "-d",
        "2s",
        "--pause",
        "300ms",
        "--no-watch",
    ]);
    let cells = s["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    assert_eq!(s["dims"][0]["name"], "connreqs");
    // Each cell ran its own value, in order: what the client counted, not how fast it
    // went (throughput against connections per request is the machine's, and moves with
    // whatever else runs on it). A connection carries at most its N requests, and a new
    // one is opened only when one is done: requests sent ≤ N × opened, and opened is at
    // most what those requests needed plus the 8 open at the end.
    for (cell, n) in cells.iter().zip([Some(1u64), Some(8), None]) {
        let r = &cell["run"]["results"];
        assert_eq!(r["requests_per_connection"].as_u64(), n, "{r}");
        let num = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k}: {r}"));
        let errors: u64 = r["errors"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let sent = num("responses") + errors + num("in_flight_at_end");
        let opened = num("connections_opened");
        assert!(num("responses") > 0 && errors == 0, "{r}");
        match n {
            Some(n) => {
                assert!(
                    sent <= n * opened,
                    "{sent} requests on {opened} connections: {r}"
                );
                assert!(
                    opened <= sent.div_ceil(n) + 8,
                    "{sent} requests on {opened}: {r}"
                );
            }
            // Keep-alive: the 8 connections, never reopened.
            None => assert_eq!(opened, 8, "{r}"),
        }
    }
    assert!(
        text.contains("1 request/connection") && text.contains("Reqs/s"),
        "{text}"
    );
    assert!(text.contains("connreqs,requests_per_s,p50_us"), "{text}");
}

#[test]
fn the_ceiling_of_a_pool_of_known_capacity() {
    // 8 children × 1 / 200 ms = 40 requests/s. A request's few milliseconds of CPU and
    // its wake-ups are small beside its 200 ms, so the capacity holds on a busy host (at
    // 2 children × 25 ms, beside other test binaries, the probe made 31/s of 80).
    let php = PhpFpm::start(8, 200);
    let ng = Nginx::start("", &php.location());
    let capacity = 8.0 / 0.2;
    let (s, text) = sweep(&[
        &ng.url("/app.php"),
        "--ceiling",
        "--slo",
        "p99<1s",
        "-c",
        "32",
        "-t",
        "1",
        "-d",
        "3s",
        "--pause",
        "300ms",
        "--budget",
        "60s",
        "--server-pid",
        &ng.pid().to_string(),
        "--server-pid",
        &php.pid().to_string(),
    ]);
    let c = &s["ceiling"];
    let met = c["met_rate"].as_f64().unwrap_or(0.0);
    assert!(
        (met - capacity).abs() <= 0.2 * capacity,
        "ceiling {met:.0}/s vs capacity {capacity:.0}/s: {c}\n{text}"
    );
    let broke = c["broke_rate"].as_f64().unwrap();
    assert!(broke > met, "{c}");
    // Past the knee the requests wait for php-fpm's children: the upstream is named.
    assert!(
        c["broke_finding"]
            .as_str()
            .unwrap_or("")
            .starts_with("upstream-saturated: "),
        "{c}\n{text}"
    );
    assert!(text.contains("Ceiling at p99<1s"), "{text}");
    // Every step's Run is in the study, open loop (corrected latency).
    for st in c["steps"].as_array().unwrap() {
        let run = &s["cells"][st["cell"].as_u64().unwrap() as usize]["run"];
        assert_eq!(run["spec"]["rate"], st["rate"]);
        assert_eq!(
            run["results"]["latency"]["corrected_for_coordinated_omission"],
            true
        );
    }
}

/// Three locations answering 200, and a second access log of `METHOD PATH STATUS` in
/// `dir` (what this server saw: the reference for a mix's counts).
fn paths_nginx(dir: &Path) -> Nginx {
    let http = format!(
        "log_format paths '$request_method $uri $status';\n    access_log {}/paths.log paths;",
        dir.display()
    );
    Nginx::start(
        &http,
        r#"location = /a { return 200 "a"; }
           location = /b { return 200 "bb"; }
           location = /c { return 200 "ccc"; }"#,
    )
}

/// Requests `ng` logged per path, once it is done with every connection.
fn logged(ng: &Nginx, dir: &Path) -> BTreeMap<String, u64> {
    ng.log();
    let text = std::fs::read_to_string(dir.join("paths.log")).unwrap_or_default();
    let mut n = BTreeMap::new();
    for l in text.lines() {
        *n.entry(l.split(' ').nth(1).unwrap().to_string())
            .or_insert(0) += 1;
    }
    n
}

/// A cell's results per endpoint: name → (requests, responses, errors).
fn endpoints(run: &Value) -> BTreeMap<String, (u64, u64, u64)> {
    run["results"]["endpoints"]
        .as_array()
        .expect("results.endpoints")
        .iter()
        .map(|e| {
            let n = |k: &str| u(e, k);
            (
                e["name"].as_str().unwrap().to_string(),
                (n("requests"), n("responses"), n("errors")),
            )
        })
        .collect()
}

/// `sweep --targets`: a weighted mix over two servers, one cell each, so each server's
/// own log is its cell's reference: every cell keeps the weights and counts per
/// endpoint what its server saw (less the requests in flight when the load stopped).
#[test]
fn a_sweep_of_a_mix_counts_each_cells_endpoints() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (ng1, ng2) = (paths_nginx(d1.path()), paths_nginx(d2.path()));
    let targets = d1.path().join("targets.jsonl");
    std::fs::write(
        &targets,
        concat!(
            "{\"url\": \"/a\", \"weight\": 5}\n",
            "{\"url\": \"/b?q=1\", \"weight\": 3, \"headers\": {\"X-Mix\": \"1\"}}\n",
            "{\"url\": \"c\", \"weight\": 2, \"name\": \"the c\"}\n",
        ),
    )
    .unwrap();
    let urls = format!("{},{}", ng1.url("/"), ng2.url("/"));
    let (s, text) = sweep(&[
        &urls,
        "--targets",
        &targets.display().to_string(),
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "1s",
        "--pause",
        "200ms",
        "--no-watch",
    ]);
    let cells = s["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(s["dims"][0]["name"], "url");
    for (cell, (ng, dir)) in cells.iter().zip([(&ng1, d1.path()), (&ng2, d2.path())]) {
        let run = &cell["run"];
        assert_eq!(run["spec"]["url"], ng.url("/"));
        assert_eq!(run["spec"]["mix"]["targets"], 3);
        assert_eq!(run["spec"]["mix"]["seed"], 1);
        let log = logged(ng, dir);
        let ep = endpoints(run);
        assert_eq!(ep.len(), 3, "{ep:?}");
        let mut counted = 0;
        for (name, path) in [("GET /a", "/a"), ("GET /b", "/b"), ("the c", "/c")] {
            let (requests, responses, errors) = ep[name];
            assert_eq!((requests, errors), (responses, 0), "{name}: {ep:?}");
            assert!(responses <= log[path], "{name}: {ep:?} vs {log:?}");
            counted += responses;
        }
        // What nginx saw beyond the responses: exactly the requests in flight at the end.
        let seen: u64 = log.values().sum();
        assert_eq!(
            seen - counted,
            u(run, "results.in_flight_at_end"),
            "{log:?}"
        );
        assert_eq!(counted, u(run, "results.responses"));
        for (path, share) in [("/a", 0.5), ("/b", 0.3), ("/c", 0.2)] {
            let got = log[path] as f64 / seen as f64;
            assert!((got - share).abs() <= 0.02, "{path}: {got} of {seen}");
        }
    }
    assert!(
        text.contains("Endpoints: p99 (requests) in each cell"),
        "{text}"
    );
    // The CSV: the cell's line (empty endpoint), then one per endpoint.
    assert!(text.contains("url,endpoint,requests_per_s"), "{text}");
    assert!(text.contains(&format!("{},the c,", ng2.url("/"))), "{text}");
}

/// A combined log of 4 seconds (50 requests a second over three paths, every tenth a
/// POST, which a replay skips): 180 requests to send, 90 to /a, 40 to /b, 50 to /c.
fn access_log(dir: &Path) -> String {
    let paths = ["/a", "/b?q=1", "/c", "/a"];
    let text: String = (0..200)
        .map(|i| {
            let method = if i % 10 == 9 { "POST" } else { "GET" };
            format!(
                "127.0.0.1 - - [25/Nov/2026:10:00:0{} +0000] \"{method} {} HTTP/1.1\" 200 5 \"-\" \"curl/8\"\n",
                i / 50,
                paths[i % 4]
            )
        })
        .collect();
    let f = dir.join("access.log");
    std::fs::write(&f, text).unwrap();
    f.display().to_string()
}

/// `sweep --replay`: every cell sends the log's requests, all of them and only them,
/// whatever its connections; nginx saw each cell's counts once per cell.
#[test]
fn a_sweep_of_a_replay_sends_the_log_in_every_cell() {
    let dir = tempfile::tempdir().unwrap();
    let ng = paths_nginx(dir.path());
    let log = access_log(dir.path());
    let (s, text) = sweep(&[
        &ng.url("/"),
        "--replay",
        &log,
        "--speed",
        "8",
        "-c",
        "2,4",
        "-t",
        "1",
        "--pause",
        "200ms",
        "--no-watch",
    ]);
    let cells = s["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(s["dims"][0]["name"], "connections");
    for (cell, c) in cells.iter().zip([2, 4]) {
        let run = &cell["run"];
        assert_eq!(run["spec"]["connections"], c);
        assert_eq!(run["spec"]["mix"]["replay"]["requests"], 180);
        assert_eq!(run["spec"]["mix"]["replay"]["skipped_with_body"], 20);
        assert_eq!(run["spec"]["requests"], 180);
        assert_eq!(u(run, "results.responses"), 180);
        let ep = endpoints(run);
        assert_eq!(ep["GET /a"], (90, 90, 0));
        assert_eq!(ep["GET /b"], (40, 40, 0));
        assert_eq!(ep["GET /c"], (50, 50, 0));
        // Paced by the log (open loop): latency counts from each request's due time.
        assert_eq!(
            run["results"]["latency"]["corrected_for_coordinated_omission"],
            true
        );
    }
    let want: BTreeMap<String, u64> = [("/a", 180), ("/b", 80), ("/c", 100)]
        .iter()
        .map(|(p, n)| (p.to_string(), *n))
        .collect();
    assert_eq!(logged(&ng, dir.path()), want);
    assert!(text.contains("GET /a") && text.contains("(90)"), "{text}");
}

#[test]
fn bad_sweeps_are_refused_before_any_load() {
    for (args, want) in [
        (
            vec!["http://127.0.0.1:1/", "--ceiling", "--slo", "p99"],
            "invalid objective `p99`",
        ),
        (
            vec!["http://127.0.0.1:1/", "--ceiling", "--slo", "rps>10"],
            "searches at a latency objective",
        ),
        (vec!["http://127.0.0.1:1/", "--ceiling"], "--slo"),
        (
            vec![
                "http://127.0.0.1:1/",
                "--ceiling",
                "--slo",
                "p99<1s",
                "-R",
                "100",
            ],
            "leave out -R",
        ),
        (vec!["http://127.0.0.1:1/", "--connreqs", "0"], "at least 1"),
        (
            vec![
                "http://127.0.0.1:1/",
                "--replay",
                "x.log",
                "--ceiling",
                "--slo",
                "p99<1s",
            ],
            "cannot be used with",
        ),
        (
            vec!["http://127.0.0.1:1/", "--replay", "x.log", "-R", "10"],
            "cannot be used with",
        ),
        (
            vec!["http://127.0.0.1:1/", "--replay", "x.log", "--h2"],
            "--replay speaks HTTP/1.1",
        ),
        (
            vec!["http://127.0.0.1:1/,http://127.0.0.1:2/", "--targets", "-"],
            "standard input is read once",
        ),
        (
            vec!["http://127.0.0.1:1/", "--targets", "/nonexistent/t.jsonl"],
            "targets file /nonexistent/t.jsonl: No such file",
        ),
        (vec!["http://127.0.0.1:1/", "-c", "4"], "connection refused"),
    ] {
        let out = loadlens().arg("sweep").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
