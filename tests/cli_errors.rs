//! Bad input: one clear line on stderr and exit code 2, before any load.

mod common;

use std::net::TcpListener;

use common::{loadlens, Nginx};

fn fails_with(args: &[&str], needle: &str) {
    let out = loadlens().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: `{needle}` not in: {err}");
    assert!(out.stdout.is_empty(), "no report on error");
}

/// A loopback port with nothing listening on it.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn bad_urls() {
    fails_with(&["run", "http//127.0.0.1/"], "invalid URL");
    fails_with(&["run", "ftp://127.0.0.1/"], "unsupported scheme `ftp`");
    fails_with(
        &["run", "http://no-such-host.invalid/"],
        "cannot resolve host",
    );
    let port = closed_port();
    fails_with(
        &["run", &format!("http://127.0.0.1:{port}/")],
        &format!(
            "connection refused to 127.0.0.1:{port} — is the server running? check the URL's port"
        ),
    );
}

#[test]
fn bad_flags() {
    let ng = Nginx::start("", "");
    let url = ng.url("/1k.txt");
    let cases: &[(&[&str], &str)] = &[
        (&["-c", "1", "-t", "2"], "must be at least -t/--threads"),
        (&["-d", "0s"], "--duration must be greater than zero"),
        (&["--connreqs", "0"], "--connreqs must be at least 1"),
        (
            &["--body-file", "/nonexistent/body"],
            "cannot read the body file",
        ),
        (&["-d", "ten"], "invalid duration"),
        (&["--bogus"], "unexpected argument '--bogus'"),
        (&["-H", "NoColon"], "invalid header"),
        (&["--rate", "0"], "--rate must be greater than zero"),
        (&["--sample", "10ms"], "--sample must be at least 100ms"),
        (
            &["--json", "/nonexistent/dir/x.json"],
            "cannot write the JSON output",
        ),
    ];
    for (flags, needle) in cases {
        let mut args = vec!["run", url.as_str()];
        args.extend_from_slice(flags);
        fails_with(&args, needle);
    }
    fails_with(&["run"], "required");
    // Nothing reached nginx.
    assert_eq!(ng.log().len(), 0);
}

#[test]
fn completed_run_exits_zero_and_prints_the_block() {
    let ng = Nginx::start("", "");
    let out = loadlens()
        .args([
            "run",
            &ng.url("/1k.txt"),
            "-n",
            "200",
            "-c",
            "2",
            "-t",
            "1",
            "--latency",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "Running 200 requests @ http://127.0.0.1:",
        "  1 threads and 2 connections",
        "Thread Stats   Avg      Stdev     Max   +/- Stdev",
        "    Latency ",
        "  Latency Distribution",
        "     99%",
        "  200 requests in ",
        "  Status codes: 200: 200",
        "Requests/sec:",
        "Transfer/sec:",
    ] {
        assert!(text.contains(want), "`{want}` missing from:\n{text}");
    }
    assert!(
        !text.contains("Socket errors"),
        "no error line when all is well"
    );
    // Not a terminal: no progress line on stderr.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn json_to_stdout_is_a_run_that_report_can_render_again() {
    let ng = Nginx::start("", "");
    let out = loadlens()
        .args([
            "run",
            &ng.url("/1k.txt"),
            "-n",
            "100",
            "-c",
            "2",
            "-t",
            "1",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is only JSON");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["results"]["responses"], 100);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.json");
    std::fs::write(&f, &out.stdout).unwrap();
    let again = loadlens()
        .arg("report")
        .arg(&f)
        .arg("--latency")
        .output()
        .unwrap();
    assert!(again.status.success());
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("  100 requests in "), "{text}");
    assert!(text.contains("Status codes: 200: 100"), "{text}");
}
