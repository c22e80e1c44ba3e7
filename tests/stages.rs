//! `--stages` and `--abort-if-behind` against a real nginx, counted in its access log:
//! each request's `$msec` (when nginx logged it) placed in the stage it fell in, from
//! the Run's start; and the connections that carried each stage (`$connection`).

mod common;

use common::{loadlens, run_json, Nginx, PhpFpm};
use serde_json::Value;

/// A second access log beside the testbed's: `$msec $connection $status`.
const STAGE_LOG: &str =
    "log_format stages '$msec $connection $status'; access_log stages.log stages;";

/// (seconds since the Unix epoch, connection serial) of each request nginx logged.
fn stage_log(ng: &Nginx) -> Vec<(f64, u64)> {
    // `log()` waits until nginx has closed every connection, so every line is in.
    let _ = ng.log();
    let text = std::fs::read_to_string(ng.root().join("stages.log")).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap())
        })
        .collect()
}

/// Requests logged in each stage of `run` (by `$msec` from the Run's start; the first
/// stage takes what came before it, the last what came after it).
fn per_stage(run: &Value, log: &[(f64, u64)]) -> Vec<Vec<(f64, u64)>> {
    let start = run["started_unix_s"].as_f64().unwrap();
    let stages = run["results"]["stages"].as_array().unwrap();
    let mut out = vec![Vec::new(); stages.len()];
    for &(at, conn) in log {
        let t = at - start;
        let i = stages
            .iter()
            .position(|s| t < s["end_s"].as_f64().unwrap())
            .unwrap_or(stages.len() - 1);
        out[i].push((t, conn));
    }
    out
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn rate_stages_ramp_as_scheduled_in_the_access_log() {
    let ng = Nginx::start(STAGE_LOG, "");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("run.html");
    // 0→400 req/s over 3 s, 400 for 3 s, 400→100 over 3 s: 600, 1200 and 750 requests.
    let run = run_json(&[
        &ng.url("/1k.txt"),
        "--stages",
        "3s:400,3s:400,3s:100",
        "-c",
        "20",
        "-t",
        "1",
        "--no-watch",
        "--html",
        html.to_str().unwrap(),
    ]);
    // The HTML timeline marks where each stage starts and draws the schedule.
    let page = std::fs::read_to_string(&html).unwrap();
    for mark in ["▸ 3s:400", "▸ 3s:100", "scheduled/s"] {
        assert!(page.contains(mark), "the HTML report has no {mark:?}");
    }
    assert_eq!(run["spec"]["duration_s"].as_f64(), Some(9.0));
    let stages = run["results"]["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 3, "{stages:?}");
    let log = stage_log(&ng);
    let logged = per_stage(&run, &log);
    for (i, (st, seen)) in stages.iter().zip(&logged).enumerate() {
        let span = f(st, "end_s") - f(st, "start_s");
        let target = f(st, "target_rps");
        let achieved = seen.len() as f64 / span;
        assert!(
            (achieved - target).abs() <= target * 0.02,
            "stage {i} ({}): nginx logged {} requests, {achieved:.1}/s against {target:.1}/s",
            st["stage"],
            seen.len()
        );
        // loadlens's own count of the stage agrees with the schedule too.
        assert!(
            (f(st, "achieved_rps") - target).abs() <= target * 0.02,
            "stage {i}: loadlens counted {st}"
        );
    }
    assert_eq!(f(&stages[0], "target_rps"), 200.0);
    assert_eq!(f(&stages[2], "target_rps"), 250.0);
    // The ramp is a ramp: the first second of 0→400/s over 3 s has a ninth of the
    // stage's requests (the integral of a line grows as the square of time).
    let first_second = logged[0].iter().filter(|(t, _)| *t < 1.0).count() as f64;
    assert!(
        (first_second - 600.0 / 9.0).abs() <= 15.0,
        "the first second of a ramp from 0 to 400/s over 3 s has ~67 requests: {first_second}"
    );
}

#[test]
fn connection_stages_open_and_close_connections() {
    // Each request waits 40 ms in php-fpm (8 children): a connection sends under
    // 25/s, so the rate follows the connections without loading the machine (at 10 ms,
    // beside other test binaries, the CPUs set the rate: the stage of 8 sent no more
    // than the stage of 4).
    let php = PhpFpm::start(8, 40);
    let ng = Nginx::start(STAGE_LOG, &php.location());
    let run = run_json(&[
        &ng.url("/app.php"),
        "--stages",
        "2s:c4,2s:c4,2s:c8,2s:c2",
        "-t",
        "2",
        "--no-watch",
    ]);
    assert_eq!(run["spec"]["connections"].as_u64(), Some(8));
    let stages = run["results"]["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 4);
    let log = stage_log(&ng);
    let logged = per_stage(&run, &log);
    for (i, (st, seen)) in stages.iter().zip(&logged).enumerate() {
        let counted = st["requests"].as_u64().unwrap() as f64;
        // A request in flight at a stage's edge may be logged on one side of it and
        // read on the other: at most the 8 connections' worth, beyond the 2%.
        assert!(
            (seen.len() as f64 - counted).abs() <= counted * 0.02 + 8.0,
            "stage {i} ({}): nginx logged {} requests, loadlens counted {counted}",
            st["stage"],
            seen.len()
        );
        assert!(st["target_rps"].is_null());
    }
    let conns = |s: &[(f64, u64)], from: f64, to: f64| {
        let mut c: Vec<u64> = s
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|x| x.1)
            .collect();
        c.sort();
        c.dedup();
        c.len()
    };
    // Flat at 4: exactly four connections carried the second stage.
    assert_eq!(conns(&logged[1], 2.0, 4.0), 4, "stage 2 at c4");
    // 4→8: more were opened.
    let up = conns(&logged[2], 5.2, 6.0);
    assert!(
        (7..=8).contains(&up),
        "stage 3 ends at c8: {up} connections"
    );
    // 8→2: closed as the target fell; at most 3 (the target 2.6→2 rounded up) in the
    // last 0.2 s, and one more whose last request, sent before the target fell, was
    // logged in them (40 ms each; later still on a busy host).
    let down = conns(&logged[3], 7.8, 99.0);
    assert!(
        (1..=4).contains(&down),
        "stage 4 ends at c2: {down} connections"
    );
    // The stage of 8 connections sent more than the stage of 4.
    assert!(f(&stages[2], "achieved_rps") > f(&stages[1], "achieved_rps") * 1.2);
}

#[test]
fn abort_if_behind_stops_a_run_the_server_cannot_keep_up_with() {
    // Every response of 91 KiB at 10 KiB/s takes 9 s: the 4 connections complete
    // nothing for seconds while the schedule asks 500/s (and ramps to it).
    let ng = Nginx::start(
        "",
        "location /slow/ { limit_rate 10k; rewrite ^/slow/(.*)$ /$1 break; }",
    );
    for stages in [None, Some("1s:500,8s:500")] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("run.json");
        let mut cmd = loadlens();
        cmd.args(["run", &ng.url("/slow/91k.bin"), "-c", "4", "-t", "1"]);
        match stages {
            Some(s) => cmd.args(["--stages", s]),
            None => cmd.args(["-R", "500", "-d", "9s"]),
        };
        let out = cmd
            .args(["--abort-if-behind", "10%", "--json"])
            .arg(&json)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{stages:?}: {stderr}");
        assert!(
            stderr.contains("loadlens: aborted at")
                && stderr.contains("req/s completed over the last")
                && stderr.contains("where the schedule asked")
                && stderr.contains("more than --abort-if-behind 10%")
                && (stderr.contains("the watch's verdict") || stderr.contains("the watch named")),
            "{stages:?}: {stderr}"
        );
        let run: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let ab = &run["results"]["aborted"];
        assert!(f(ab, "behind_pct") > 90.0, "{ab}");
        assert!(f(ab, "at_s") < 5.0, "stopped early: {ab}");
        assert!(run["results"]["duration_s"].as_f64().unwrap() < 5.0);
        assert!(f(ab, "scheduled_rps") > 200.0, "{ab}");
    }
}

#[test]
fn bad_stages_exit_2_saying_what_is_wrong() {
    for (args, says) in [
        (&["--stages", "10s:100,10s:c5"][..], "mixes kinds"),
        (&["--stages", "0s:100"], "zero time"),
        (&["--stages", "10q:100"], "duration unit"),
        (&["--stages", "10s:100", "-d", "5s"], "cannot be used with"),
        (&["--stages", "10s:100", "-R", "5"], "cannot be used with"),
        (&["--stages", "10s:c5", "-c", "5"], "drop -c"),
        (&["-c", "2", "--abort-if-behind", "10%"], "open-loop"),
        (
            &["-R", "10", "--abort-if-behind", "150%"],
            "between 0% and 100%",
        ),
    ] {
        let out = loadlens()
            .args(["run", "http://127.0.0.1:9/"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn a_schedule_the_connections_cannot_keep_up_with_counts_what_was_not_sent() {
    // Two php-fpm children at 200 ms a request: the 2 connections send at most 10/s
    // while the schedule has 60 due in its 2 s (a ramp to 40/s, then 40/s). What was
    // due and never sent is the client's, counted apart from what was sent.
    let php = PhpFpm::start(2, 200);
    let ng = Nginx::start("", &php.location());
    let run = run_json(&[
        &ng.url("/app.php"),
        "--stages",
        "1s:40,1s:40",
        "-c",
        "2",
        "-t",
        "1",
        "--no-watch",
    ]);
    let r = &run["results"];
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    let (responses, in_flight, unsent) = (
        n("responses"),
        n("in_flight_at_end"),
        n("due_unsent_at_end"),
    );
    let errors: u64 = r["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(errors, 0, "{r}");
    assert_eq!(
        responses + in_flight + unsent,
        60,
        "{responses} responses + {in_flight} in flight + {unsent} due unsent"
    );
    // 2 connections × (2 s ÷ 200 ms) + the 2 on the wire: at most 22 of the 60 went out.
    assert!(unsent >= 38, "{unsent} due unsent");
    // What was sent is what nginx saw.
    assert_eq!(ng.log().len() as u64, responses + in_flight);
}
