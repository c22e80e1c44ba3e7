//! `loadlens sweep` against real servers: a grid (one cell per requests-per-connection
//! value, each run with it), and a ceiling search against a php-fpm pool whose
//! capacity is known by construction (children ÷ script time).

mod common;

use common::{assert_ok, assert_valid, loadlens, Nginx, PhpFpm};
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
    // 2 children × 1 / 25 ms = 80 requests/s.
    let php = PhpFpm::start(2, 25);
    let ng = Nginx::start("", &php.location());
    let capacity = 2.0 / 0.025;
    let (s, text) = sweep(&[
        &ng.url("/app.php"),
        "--ceiling",
        "--slo",
        "p99<250ms",
        "-c",
        "32",
        "-t",
        "1",
        "-d",
        "2s",
        "--pause",
        "300ms",
        "--budget",
        "50s",
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
    assert!(text.contains("Ceiling at p99<250ms"), "{text}");
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
        (vec!["http://127.0.0.1:1/", "-c", "4"], "connection refused"),
    ] {
        let out = loadlens().arg("sweep").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
