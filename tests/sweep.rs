//! `loadlens sweep` against real servers: a grid whose shape is the published one
//! (throughput rises with requests per connection), and a ceiling search against a
//! php-fpm pool whose capacity is known by construction (children ÷ script time).

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
fn throughput_rises_with_requests_per_connection() {
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
    let rps: Vec<f64> = cells
        .iter()
        .map(|c| c["run"]["results"]["requests_per_s"].as_f64().unwrap())
        .collect();
    // A new TCP connection per request costs the server (and client) far more than a
    // request on an open one: 8 per connection and keep-alive are each a large gain
    // over 1 (measured ~3×), not noise. Between 8 and keep-alive the connection cost is
    // already amortised (within ±10% run to run on 2 busy cores, either way round), so
    // only "not clearly worse" is asserted there.
    assert!(
        rps[0] * 1.3 < rps[1] && rps[0] * 1.3 < rps[2] && rps[2] > rps[1] * 0.8,
        "{rps:?}"
    );
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
            "invalid SLO",
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
