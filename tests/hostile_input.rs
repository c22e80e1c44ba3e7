//! Inputs with limits: each case failed before (issue: reliability) — a header that
//! puts CR/LF on the wire, a body file that never ends, more connections than open
//! files, port 0, a Run from a newer loadlens — and now fails fast with one line and
//! exit 2, nothing sent. And a run stopped by a signal says so and exits 128 + signal.

mod common;

use common::{loadlens, output_within, wait_exit, Nginx, HANG};

/// Refused in one line with exit 2 and nothing on stdout, before any load. "Fast" is
/// not timed (what no load means is checked where a server can tell: nothing reached
/// it); the process must only end on its own, within `HANG`: an input read forever or
/// a load that was not refused would not.
fn fails_fast(args: &[&str], needle: &str) {
    let mut cmd = loadlens();
    cmd.args(args);
    let out = output_within(cmd, HANG);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: `{needle}` not in: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn requests_that_would_smuggle_or_never_start_are_refused() {
    let ng = Nginx::start("", "");
    let url = ng.url("/1k.txt");
    let cases: &[(&[&str], &str)] = &[
        (&["-H", "X: a\r\nY: b"], "CR, LF and NUL are not allowed"),
        (
            &["-H", "X: a\nGET / HTTP/1.1"],
            "CR, LF and NUL are not allowed",
        ),
        (&["-H", "Bad Name: v"], "with a token name"),
        (&["-H", "(x): v"], "with a token name"),
        (&["-m", "GE T"], "invalid method"),
        (&["-m", "GET\r\n"], "invalid method"),
        (&["--body-file", "/dev/zero"], "is not a regular file"),
        (&["--body-file", "/dev/stdin"], "is not a regular file"),
    ];
    for (flags, needle) in cases {
        let mut args = vec!["run", url.as_str(), "-d", "1s"];
        args.extend_from_slice(flags);
        fails_fast(&args, needle);
    }
    fails_fast(
        &["run", &url, "-d", "-1s"],
        "a duration cannot be negative: `-1s`",
    );
    fails_fast(
        &["run", &url, "-d", "1s", "--timeout", "-2s"],
        "a duration cannot be negative",
    );
    // A token method other than GET is fine.
    let out = loadlens()
        .args([
            "run", &url, "-n", "5", "-c", "1", "-t", "1", "-m", "OPTIONS", "-q",
        ])
        .output()
        .unwrap();
    common::assert_ok(&out);
    // Nothing of the refused runs reached nginx.
    assert_eq!(ng.log().len(), 5);
}

#[test]
fn a_body_file_past_the_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len((64 << 20) + 1).unwrap(); // sparse: no disk used
    fails_fast(
        &[
            "run",
            "http://127.0.0.1:9/",
            "--body-file",
            big.to_str().unwrap(),
        ],
        "at most 64 MiB",
    );
}

#[test]
fn more_connections_than_open_files_is_refused_before_any_load() {
    let ng = Nginx::start("", "");
    // A hard limit of 1024 files: 5000 connections cannot be had, whatever the soft
    // limit is raised to.
    let mut cmd = std::process::Command::new("prlimit");
    cmd.arg("--nofile=1024:1024")
        .arg(env!("CARGO_BIN_EXE_loadlens"))
        .args(["run", &ng.url("/1k.txt"), "-c", "5000", "-d", "1s"]);
    let out = output_within(cmd, HANG);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("-c 5000 needs about 5256 open files but the limit is 1024 (hard limit 1024)"),
        "{err}"
    );
    assert!(err.contains("ulimit -n"), "{err}");
    // Before any load: not one connection reached nginx.
    assert_eq!(ng.log().len(), 0);
    // Within the hard limit the soft limit is raised and the run goes on.
    let out = std::process::Command::new("prlimit")
        .arg("--nofile=256:4096")
        .arg(env!("CARGO_BIN_EXE_loadlens"))
        .args([
            "run",
            &ng.url("/1k.txt"),
            "-c",
            "600",
            "-t",
            "1",
            "-n",
            "1200",
            "-q",
        ])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert_eq!(ng.log().len(), 1200);
}

#[test]
fn port_zero_and_a_run_from_a_newer_loadlens() {
    fails_fast(&["run", "http://127.0.0.1:0/"], "port 0 is not a port");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("future.json");
    std::fs::write(&p, r#"{"schema_version": 999}"#).unwrap();
    fails_fast(
        &["report", p.to_str().unwrap()],
        "schema_version 999, from a newer loadlens",
    );
}

/// Found by the cli fuzz target: a duration too large for `Duration` panicked.
#[test]
fn a_duration_past_a_year_is_one_line() {
    fails_fast(
        &[
            "run",
            "http://127.0.0.1:1/",
            "-d",
            "99999999999999999999999999",
        ],
        "at most a year",
    );
    fails_fast(
        &["run", "http://127.0.0.1:1/", "--timeout", "9000h"],
        "at most a year",
    );
}

/// Found by the run_json fuzz target: a profile stack naming a frame the profile does
/// not have panicked `report` (an index out of bounds); it is refused in one line.
#[test]
fn a_run_whose_profile_names_a_missing_frame_is_refused() {
    let src = format!(
        "{}/tests/data/runs/gzip-cpu-before.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    run["evidence"]["profile"]["stacks"][0]["frames"][0] = 99_999.into();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("damaged.json");
    std::fs::write(&p, run.to_string()).unwrap();
    fails_fast(
        &["report", p.to_str().unwrap()],
        "a profile stack names frame 99999 of",
    );
}

#[test]
fn a_run_stopped_by_a_signal_says_so_and_exits_128_plus_it() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    for (sig, name, code) in [
        (libc::SIGINT, "SIGINT", 130),
        (libc::SIGTERM, "SIGTERM", 143),
    ] {
        let json = dir.path().join(format!("{name}.json"));
        let stdout = dir.path().join(format!("{name}.out"));
        // An hour: the run can only end early by the signal.
        let mut child = loadlens()
            .args([
                "run",
                &ng.url("/1k.txt"),
                "-c",
                "2",
                "-t",
                "1",
                "-d",
                "1h",
                "--no-watch",
            ])
            .arg("--json")
            .arg(&json)
            .stdout(std::fs::File::create(&stdout).unwrap())
            .spawn()
            .unwrap();
        // The load is under way once nginx has served some of it.
        let logged = || {
            std::fs::read_to_string(ng.root().join("access.log"))
                .unwrap_or_default()
                .lines()
                .count() as u64
        };
        let before = logged();
        let t0 = std::time::Instant::now();
        while logged() < before + 10 && t0.elapsed() < HANG {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let served = logged() - before;
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        assert!(served >= 10, "the load did not reach nginx within {HANG:?}");
        // Stops: killed (and failed) if still running after `HANG`, where a run that
        // ignored the signal would go on for the hour.
        let status = wait_exit(&mut child, HANG);
        assert_eq!(status.code(), Some(code), "{name}");
        let text = std::fs::read_to_string(&stdout).unwrap();
        assert!(text.contains(&format!("interrupted by {name}")), "{text}");
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(run["interrupted"], name);
        assert!(run["results"]["responses"].as_u64().unwrap() > 0);
        // Every request nginx had served before the signal is in the Run: as a
        // response, or in flight when the run stopped.
        let accounted = run["results"]["responses"].as_u64().unwrap()
            + run["results"]["in_flight_at_end"].as_u64().unwrap();
        assert!(
            accounted >= served,
            "{accounted} < {served}: {}",
            run["results"]
        );
    }
}

#[test]
fn credentials_in_the_url_are_sent_as_basic_auth_and_not_recorded() {
    // base64("user:s3cret")
    let ng = Nginx::start(
        "",
        "location /private/ { if ($http_authorization != \"Basic dXNlcjpzM2NyZXQ=\") { return 401; } return 200 ok; }",
    );
    let url = ng
        .url("/private/x")
        .replace("http://", "http://user:s3cret@");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = loadlens()
        .args([
            "run",
            &url,
            "-n",
            "20",
            "-c",
            "2",
            "-t",
            "1",
            "--latency",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Status codes: 200: 20"), "{text}");
    let saved = std::fs::read_to_string(&json).unwrap();
    for printed in [text.as_ref(), saved.as_str()] {
        assert!(!printed.contains("s3cret"), "the password was printed back");
        assert!(
            !printed.contains("dXNlcjpzM2NyZXQ"),
            "the credentials were recorded"
        );
    }
}
