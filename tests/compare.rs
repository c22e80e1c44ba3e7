//! `loadlens run --repeat` and `loadlens compare` against real nginx whose throughput is
//! fixed by construction: `limit_rate 120k` makes every 91 KiB response on /fast/ take
//! 0.27 s (spread < 1 ms), and php-fpm, with a child free for every request (8 for 4
//! connections) and a script that sleeps 1 s, makes /app.php take 1.00 s; each
//! repetition's window ends half-way between two completions, so a repetition counts
//! the same responses however busy the machine is. (nginx's `limit_rate` alone is not
//! exact for a slow side: it counts whole seconds and lets a second's worth through at
//! once, so a 91 KiB response at 91k/s sometimes came in 0.5 s.) The statistics
//! themselves are unit-tested against reference values in `src/stats.rs`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{assert_ok, assert_valid, loadlens, Nginx, PhpFpm};
use serde_json::Value;

/// Each connection: 5 responses in 1.48 s at 120k/s (0.27 s each: the 6th would end
/// at 1.61 s), 1 from the 1 s script (the 2nd at 2.00 s).
const WINDOW: &str = "1480ms";

/// nginx with /fast/ (limit_rate) and /app.php (php-fpm, 1 s each): 8 children, so
/// the 4 requests a repetition leaves in flight (php finishes them anyway) never hold
/// up the next repetition's 4.
/// The loads of this file one at a time: each counts whole responses in its window.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn server() -> (Nginx, PhpFpm) {
    let php = PhpFpm::start(8, 1000);
    let ng = Nginx::start(
        "",
        &format!(
            "location /fast/ {{ limit_rate 120k; rewrite ^/fast/(.*)$ /$1 break; }} {}",
            php.location()
        ),
    );
    (ng, php)
}

/// `loadlens run URL -c C --repeat N` into `dir/name.json`.
fn run(dir: &Path, name: &str, url: &str, conns: &str, repeat: &str) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    let out = loadlens()
        .args([
            "run", url, "-c", conns, "-t", "1", "-d", WINDOW, "--repeat", repeat,
        ])
        .args(["--pause", "200ms", "--no-probe", "-q", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_ok(&out);
    path
}

fn compare(args: &[&Path], extra: &[&str]) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cmp.json");
    let out = loadlens()
        .arg("compare")
        .args(args)
        .args(extra)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let v = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_valid("comparison", &v);
    (out, v)
}

fn row<'a>(c: &'a Value, metric: &str) -> &'a Value {
    c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {metric}: {c}"))
}

#[test]
fn repeated_runs_compare_significant_only_when_the_server_changed() {
    let _one = serial();
    let (ng, _php) = server();
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (ng.url("/fast/91k.bin"), ng.url("/app.php"));
    let a = run(dir.path(), "a", &fast, "4", "5");
    let b = run(dir.path(), "b", &fast, "4", "5");
    let s = run(dir.path(), "slow", &slow, "4", "5");

    // Every repetition is in the Run, with its own results; the totals add up.
    let ra: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let reps = ra["repetitions"].as_array().unwrap();
    assert_eq!(reps.len(), 5);
    let per: Vec<u64> = reps
        .iter()
        .map(|r| r["results"]["responses"].as_u64().unwrap())
        .collect();
    assert_eq!(per, [20; 5], "4 connections × 5 responses each");
    assert_eq!(ra["results"]["responses"], 100);
    assert_valid("run", &ra);

    // The same configuration twice: not significant.
    let (out, c) = compare(&[&a, &b], &[]);
    assert!(out.status.success());
    let rps = &row(&c, "requests/s")["changes"][0];
    assert_eq!(rps["verdict"], "not_significant", "{rps}");
    assert_eq!(rps["samples"], "repetitions");
    assert!(
        c["warnings"].as_array().unwrap().is_empty(),
        "{}",
        c["warnings"]
    );

    // Half the rate: significant, in the right direction, and --fail-if-slower fails.
    // (Judged whatever else the machine runs: the rates are fixed by construction; the
    // gate's refusal is tests/ci.rs's.)
    let (out, c) = compare(&[&a, &s], &["--fail-if-slower", "10", "--judge-untrusted"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rps = &row(&c, "requests/s")["changes"][0];
    assert_eq!(rps["verdict"], "significant", "{rps}");
    let reps = |p: &Path| -> Vec<(u64, f64)> {
        let r: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        r["repetitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["results"]["responses"].as_u64().unwrap(),
                    x["results"]["duration_s"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert!(
        rps["pct"].as_f64().unwrap() < -70.0,
        "{rps} fast {:?} slow {:?}",
        reps(&a),
        reps(&s)
    );
    let p50 = &row(&c, "latency p50")["changes"][0];
    assert_eq!(p50["verdict"], "significant", "{p50}");
    assert!(p50["pct"].as_f64().unwrap() > 200.0, "{p50}");
    // The other way round it is faster: no failure.
    let (out, _) = compare(&[&s, &a], &["--fail-if-slower", "10", "--judge-untrusted"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("significant (p="), "{text}");
    assert!(text.contains("Welch"), "{text}");
}

#[test]
fn mismatched_runs_warn_and_one_second_is_not_enough_data() {
    let _one = serial();
    let (ng, _php) = server();
    let dir = tempfile::tempdir().unwrap();
    let fast = ng.url("/fast/91k.bin");
    let a = run(dir.path(), "a", &fast, "4", "1");
    let b = run(dir.path(), "b", &fast, "2", "1");
    let (out, c) = compare(&[&a, &b], &[]);
    assert!(out.status.success());
    let w = c["warnings"].to_string();
    assert!(w.contains("connections 2 vs 4"), "{w}");
    // One run each, one full second each: no basis for a test.
    let rps = &row(&c, "requests/s")["changes"][0];
    assert_eq!(rps["verdict"], "not_enough_data", "{rps}");
    assert_eq!(rps["samples"], "seconds");
    assert_eq!(c["runs"][0]["repetitions"], 1);
}

#[test]
fn compare_refuses_what_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"hello": 1}"#).unwrap();
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, r#"{"schema_version": 999}"#).unwrap();
    for (args, want) in [
        (
            vec![foreign.clone(), foreign.clone()],
            "not a loadlens Run: no schema_version",
        ),
        (vec![newer.clone(), newer.clone()], "999"),
        (
            vec![dir.path().join("missing.json"), foreign],
            "cannot read",
        ),
    ] {
        let out = loadlens().arg("compare").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want) && err.lines().count() == 1, "{err}");
    }
    let out = loadlens()
        .args(["compare", "a.json", "b.json", "--fail-if-slower", "-3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
