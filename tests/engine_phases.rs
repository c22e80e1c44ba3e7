//! Phase timing against real nginx: every new connection's TCP connect and TLS handshake
//! and every response's time to first byte and body are counted once, no more.

mod common;

use std::collections::HashSet;

use common::{run_json, u, Nginx};

#[test]
fn connreqs_1_over_tls_times_every_handshake_as_its_own_phase() {
    let ng = Nginx::start_tls("", "ssl");
    let run = run_json(&[
        "-n",
        "300",
        "-c",
        "4",
        "-t",
        "2",
        "--connreqs",
        "1",
        "-k",
        "--no-watch",
        &ng.https_url("/1k.txt"),
    ]);
    let log = ng.log();
    assert_eq!(u(&run, "results.responses"), 300);
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(conns.len(), 300, "one connection per request");
    let opened = u(&run, "results.connections_opened");
    assert_eq!(opened, 300);
    assert_eq!(u(&run, "results.phases.tls_handshake.count"), opened);
    assert_eq!(u(&run, "results.phases.connect.count"), opened);
    assert_eq!(u(&run, "results.phases.ttfb.count"), 300);
    assert_eq!(u(&run, "results.phases.body.count"), 300);
    // A handshake is a round trip and public-key work on both sides: never 0.
    assert!(u(&run, "results.phases.tls_handshake.min_us") >= 1);
    assert!(
        run["results"]["phases"]["tls_handshake"]["histogram"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "the handshake histogram is in the Run"
    );
}

#[test]
fn keep_alive_counts_one_connect_per_connection_and_a_ttfb_per_response() {
    let ng = Nginx::start("", "");
    let run = run_json(&[
        "-n",
        "2000",
        "-c",
        "8",
        "-t",
        "2",
        "--no-watch",
        &ng.url("/1k.txt"),
    ]);
    assert_eq!(ng.log().len(), 2000);
    let opened = u(&run, "results.connections_opened");
    assert!((1..=8).contains(&opened), "{opened}");
    assert_eq!(u(&run, "results.phases.connect.count"), opened);
    assert!(
        run["results"]["phases"]["tls_handshake"].is_null(),
        "plain http"
    );
    assert_eq!(u(&run, "results.phases.ttfb.count"), 2000);
    assert_eq!(u(&run, "results.phases.body.count"), 2000);
    // A 91 KiB body arrives in several reads: its body phase is longer than a 1 KiB one.
    let big = run_json(&[
        "-n",
        "200",
        "-c",
        "2",
        "-t",
        "1",
        "--no-watch",
        &ng.url("/91k.bin"),
    ]);
    assert_eq!(u(&big, "results.phases.body.count"), 200);
    assert!(u(&big, "results.phases.body.max_us") > 0);
}

#[test]
fn the_terminal_report_has_a_phase_line() {
    let ng = Nginx::start_tls("", "ssl");
    let out = common::loadlens()
        .args(["run", "-n", "50", "-c", "2", "-t", "1", "--connreqs", "1"])
        .args(["-k", "--no-watch", &ng.https_url("/1k.txt")])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Phases p50/p99"))
        .unwrap_or_else(|| panic!("no phase line in\n{text}"));
    for phase in ["dns ", "connect ", "tls ", "ttfb ", "body "] {
        assert!(line.contains(phase), "{phase} missing from `{line}`");
    }
}
