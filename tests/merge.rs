//! Segments and merge against real nginx: N segments run side by side add up exactly to
//! the whole load (nginx's access log is the reference), the merged histogram is the
//! histogram of the union, and Runs that do not belong together are refused.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{
    assert_ok, assert_valid, latency_histogram, loadlens, percentile_us, run_segments, u, unix_now,
    Nginx,
};
use serde_json::Value;

/// Runs one segment (`I/N`) of a small -n 30 -c 10 load and returns its Run's file.
fn one_segment(f: &Path, seg: &str, url: &str) -> PathBuf {
    let out = loadlens()
        .args([
            "run",
            "-n",
            "30",
            "-c",
            "10",
            "-t",
            "1",
            url,
            "--segment",
            seg,
        ])
        .arg("--json")
        .arg(f)
        .arg("-q")
        .output()
        .unwrap();
    assert_ok(&out);
    f.to_path_buf()
}

fn read(f: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap()
}

fn merge(files: &[PathBuf], out: &Path) -> Output {
    loadlens()
        .arg("merge")
        .args(files)
        .arg("--json")
        .arg(out)
        .output()
        .unwrap()
}

/// The merged Run's latency is the union's: the segments' histograms added here,
/// independently of loadlens, give the same count, p50, p99 and max.
fn assert_union_histogram(merged: &Value, segments: &[Value]) {
    let mut union = latency_histogram(&segments[0]["results"]["latency"]);
    for s in &segments[1..] {
        union
            .add(latency_histogram(&s["results"]["latency"]))
            .unwrap();
    }
    assert_eq!(u(merged, "results.latency.count"), union.len());
    assert_eq!(percentile_us(merged, 50.0), union.value_at_quantile(0.5));
    assert_eq!(percentile_us(merged, 99.0), union.value_at_quantile(0.99));
    assert_eq!(u(merged, "results.latency.max_us"), union.max());
    assert_eq!(
        latency_histogram(&merged["results"]["latency"]).len(),
        union.len()
    );
}

#[test]
fn budget_segments_add_up_to_the_access_log_and_the_union_histogram() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let url = ng.url("/1k.txt");
    let files = run_segments(
        dir.path(),
        3,
        &["-n", "3001", "-c", "10", "-t", "1", &url],
        unix_now() + 2.0,
    );
    let segs: Vec<Value> = files.iter().map(|f| read(f)).collect();
    let conns: Vec<u64> = segs.iter().map(|s| u(s, "spec.connections")).collect();
    assert_eq!(conns, [4, 3, 3], "connections split exactly");
    let budget: Vec<u64> = segs.iter().map(|s| u(s, "spec.requests")).collect();
    assert_eq!(budget, [1001, 1000, 1000], "-n split exactly");
    for (i, s) in segs.iter().enumerate() {
        assert_eq!(u(s, "segment.index"), i as u64 + 1);
        assert_eq!(u(s, "segment.count"), 3);
        assert_eq!(u(s, "segment.whole_connections"), 10);
        assert_valid("run", s);
    }

    let out_path = dir.path().join("merged.json");
    let out = merge(&files, &out_path);
    assert_ok(&out);
    let m = read(&out_path);
    assert_valid("run", &m);
    let log = ng.log();
    assert_eq!(u(&m, "results.responses"), 3001);
    assert_eq!(
        log.len(),
        3001,
        "nginx logged every request of every segment"
    );
    assert_eq!(
        u(&m, "results.bytes_read"),
        log.iter().map(|l| l.bytes_sent).sum::<u64>()
    );
    assert_eq!(u(&m, "results.status_codes.200"), 3001);
    assert_eq!(u(&m, "spec.connections"), 10);
    assert_eq!(u(&m, "spec.requests"), 3001);
    assert_eq!(m["merged"]["segments"].as_array().unwrap().len(), 3);
    assert_eq!(m["merged"]["missing"], serde_json::json!([]));
    assert!(m.get("segment").is_none());
    assert_union_histogram(&m, &segs);
    // The merged Run is a Run: `loadlens report` renders it with its segments.
    let text = loadlens().arg("report").arg(&out_path).output().unwrap();
    assert_ok(&text);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Merged 3 of 3 segments:"), "{text}");

    refusals(dir.path(), &files, &ng);
}

/// Runs that are not segments of one load are refused with one line and exit 2; a
/// missing segment is merged and named.
fn refusals(dir: &Path, files: &[PathBuf], ng: &Nginx) {
    let refused = |files: &[PathBuf], needle: &str| {
        let out = merge(files, &dir.join("refused.json"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "`{needle}` not in: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    };
    refused(&[files[0].clone(), files[0].clone()], "is given twice");
    // Another load (a different path), same split; and a different split (1/1).
    let other = one_segment(&dir.join("other.json"), "1/3", &ng.url("/91k.bin"));
    refused(&[files[1].clone(), other], "segments of different loads");
    let single = one_segment(&dir.join("single.json"), "1/1", &ng.url("/1k.txt"));
    refused(&[files[1].clone(), single], "different splits");
    // A whole Run is not a segment.
    let whole = dir.join("whole.json");
    let out = loadlens()
        .args(["run", "-n", "10", "-c", "2", "-t", "1", &ng.url("/1k.txt")])
        .arg("--json")
        .arg(&whole)
        .arg("-q")
        .output()
        .unwrap();
    assert_ok(&out);
    refused(&[files[1].clone(), whole], "is not a segment Run");

    // Segments 2 and 3 only: merged, with segment 1 named missing.
    let out_path = dir.join("partial.json");
    let out = loadlens()
        .arg("merge")
        .args(&files[1..])
        .arg("--json")
        .arg(&out_path)
        .output()
        .unwrap();
    assert_ok(&out);
    let m = read(&out_path);
    assert_eq!(m["merged"]["missing"], serde_json::json!([1]));
    assert_eq!(u(&m, "results.responses"), 2000);
    let text = loadlens().arg("report").arg(&out_path).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("segment 1/3 is missing"));
}

#[test]
fn duration_segments_start_together_and_add_up_to_the_access_log() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    // Whole milliseconds, as passed to --start-at.
    let start_at = ((unix_now() + 2.0) * 1000.0).round() / 1000.0;
    let files = run_segments(
        dir.path(),
        3,
        &[
            "-d",
            "2s",
            "-c",
            "6",
            "-t",
            "1",
            "--no-watch",
            &ng.url("/1k.txt"),
        ],
        start_at,
    );
    let segs: Vec<Value> = files.iter().map(|f| read(f)).collect();
    for s in &segs {
        assert!(
            s["started_unix_s"].as_f64().unwrap() >= start_at,
            "a segment started before --start-at"
        );
        assert_eq!(s["segment"]["start_at_unix_s"].as_f64(), Some(start_at));
    }
    let out_path = dir.path().join("merged.json");
    assert_ok(&merge(&files, &out_path));
    let m = read(&out_path);
    let log = ng.log();
    // Requests abandoned in flight at the deadline may still be logged by nginx.
    let in_flight = u(&m, "results.in_flight_at_end");
    let responses = u(&m, "results.responses");
    assert!(responses > 0);
    assert!(
        log.len() as u64 >= responses && log.len() as u64 <= responses + in_flight,
        "access log {} vs merged {responses} (+{in_flight} in flight)",
        log.len()
    );
    assert_eq!(
        responses,
        segs.iter().map(|s| u(s, "results.responses")).sum::<u64>()
    );
    assert_union_histogram(&m, &segs);
    // Timelines aligned on the wall clock: every second of every segment is counted
    // once, in the second it happened.
    let sum = |v: &Value| -> u64 {
        v["results"]["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["responses"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum(&m), segs.iter().map(sum).sum::<u64>());
    let longest = segs
        .iter()
        .map(|s| s["results"]["timeline"].as_array().unwrap().len())
        .max()
        .unwrap();
    assert_eq!(m["results"]["timeline"].as_array().unwrap().len(), longest);
}

#[test]
fn rate_segments_add_up_to_the_requested_rate() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let files = run_segments(
        dir.path(),
        3,
        &[
            "-R",
            "600",
            "-d",
            "3s",
            "-c",
            "7",
            "-t",
            "1",
            "--no-watch",
            &ng.url("/1k.txt"),
        ],
        unix_now() + 2.0,
    );
    let segs: Vec<Value> = files.iter().map(|f| read(f)).collect();
    let rates: f64 = segs
        .iter()
        .map(|s| s["spec"]["rate"].as_f64().unwrap())
        .sum();
    assert!(
        (rates - 600.0).abs() < 1e-6,
        "segment rates add up to {rates}"
    );
    let out_path = dir.path().join("merged.json");
    assert_ok(&merge(&files, &out_path));
    let m = read(&out_path);
    assert_eq!(m["spec"]["rate"].as_f64(), Some(600.0));
    // Each segment's achieved rate over its own window (a segment that started a few
    // milliseconds after another does not widen it), added up.
    let achieved: f64 = m["merged"]["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["requests_per_s"].as_f64().unwrap())
        .sum();
    assert!(
        (achieved - 600.0).abs() <= 6.0,
        "the segments' rates add up to {achieved:.1} req/s: not within 1% of 600"
    );
    let merged_rate = m["results"]["requests_per_s"].as_f64().unwrap();
    assert!(merged_rate > 0.0 && merged_rate <= achieved + 1e-6);
    assert_eq!(
        m["results"]["latency"]["corrected_for_coordinated_omission"],
        Value::Bool(true)
    );
    let log = ng.log();
    assert!(log.len() as u64 >= u(&m, "results.responses"));
}

#[test]
fn bad_segment_flags_are_one_line_and_exit_2() {
    let ng = Nginx::start("", "");
    let url = ng.url("/1k.txt");
    let fails = |args: &[&str], needle: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_loadlens"))
            .arg("run")
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: `{needle}` not in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    };
    fails(&[&url, "--segment", "0/3"], "segments are numbered from 1");
    fails(&[&url, "--segment", "4/3"], "I must be in 1..=3");
    fails(&[&url, "--segment", "two"], "expected I/N");
    fails(
        &[&url, "-c", "4", "--segment", "1/5"],
        "need at least 5 connections",
    );
    fails(
        &[&url, "-n", "2", "--segment", "1/3"],
        "cannot be split into 3",
    );
    let late = format!("{:.0}", unix_now() - 100.0);
    fails(&[&url, "--start-at", &late], "in the past");
    let far = format!("{:.0}", unix_now() + 7200.0);
    fails(&[&url, "--start-at", &far], "more than an hour ahead");
    fails(
        &[&url, "--segment", "1/2", "--repeat", "2"],
        "cannot be combined",
    );
    assert!(ng.log().is_empty(), "no load was sent");
}
