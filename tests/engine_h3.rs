//! HTTP/3 exactness against a real Caddy serving HTTP/3 on a loopback UDP port: every
//! response loadlens counts is one Caddy logged as an `HTTP/3.0` request, with `-n`,
//! `-d`, `--connreqs 1`, several streams per connection and a mix of targets; bad
//! combinations are refused before any load.

mod common;

use std::collections::{HashMap, HashSet};

use common::{loadlens, run_json, status_codes, u, Caddy, CaddyLine};

fn assert_no_errors(run: &serde_json::Value) {
    assert_eq!(
        run["results"]["errors"],
        serde_json::json!({"connect":0,"read":0,"write":0,"timeout":0,"parse":0,"reset":0})
    );
}

fn all_h3(log: &[CaddyLine]) {
    let other: Vec<&CaddyLine> = log.iter().filter(|l| l.proto != "HTTP/3.0").collect();
    assert!(
        other.is_empty(),
        "not HTTP/3: {:?}",
        &other[..other.len().min(3)]
    );
}

#[test]
fn ten_streams_per_connection_match_the_access_log() {
    let caddy = Caddy::start("");
    let run = run_json(&[
        "--h3",
        "-k",
        "-n",
        "2000",
        "-c",
        "4",
        "-t",
        "2",
        "--max-concurrent-streams",
        "10",
        "--no-watch",
        &caddy.https_url("/1k.txt"),
    ]);
    let log = caddy.log();
    assert_eq!(run["results"]["protocol"], "h3");
    assert_eq!(run["spec"]["http"], "h3");
    assert_eq!(u(&run, "results.streams_per_connection"), 10);
    assert_eq!(u(&run, "results.responses"), 2000);
    assert_no_errors(&run);
    assert_eq!(log.len(), 2000, "Caddy logged every request, no more");
    all_h3(&log);
    assert!(log.iter().all(|l| l.status == 200 && l.uri == "/1k.txt"));
    assert_eq!(status_codes(&run).get(&200).copied(), Some(2000));
    // Four connections, one QUIC handshake each.
    assert_eq!(u(&run, "results.connections_opened"), 4);
    assert_eq!(u(&run, "results.phases.tls_handshake.count"), 4);
    assert_eq!(u(&run, "results.phases.ttfb.count"), 2000);
    assert_eq!(u(&run, "results.phases.body.count"), 2000);
    assert_eq!(u(&run, "results.latency.count"), 2000);
    // Each response carried its 1024-byte body.
    assert!(u(&run, "results.bytes_read") >= 2000 * 1024);
    // The QUIC stack's own counts: one RTT value per connection; the 2000 KiB of
    // bodies came in datagrams of at most 1500 bytes; the datagrams moved in no more
    // system calls than datagrams (several per call with GSO/GRO).
    let q = &run["results"]["quic"];
    assert!(u(q, "packets_sent") >= 4, "{q}");
    assert_eq!(u(q, "rtt.count"), 4, "{q}");
    assert!(u(q, "send_calls") >= 1 && u(q, "send_calls") <= u(q, "datagrams_sent"));
    assert!(u(q, "datagrams_received") >= 2000 * 1024 / 1500, "{q}");
}

#[test]
fn a_new_connection_for_every_request_with_connreqs_1() {
    let caddy = Caddy::start("");
    let run = run_json(&[
        "--h3",
        "-k",
        "-n",
        "300",
        "-c",
        "4",
        "-t",
        "2",
        "--connreqs",
        "1",
        "--no-watch",
        &caddy.https_url("/1k.txt"),
    ]);
    let log = caddy.log();
    assert_eq!(u(&run, "results.responses"), 300);
    assert_no_errors(&run);
    assert_eq!(log.len(), 300);
    all_h3(&log);
    assert_eq!(u(&run, "results.connections_opened"), 300);
    assert_eq!(u(&run, "results.requests_per_connection"), 1);
    assert_eq!(u(&run, "results.quic.rtt.count"), 300);
    assert_eq!(u(&run, "results.phases.tls_handshake.count"), 300);
}

#[test]
fn a_timed_run_counts_each_request_once() {
    let caddy = Caddy::start("");
    let run = run_json(&[
        "--h3",
        "-k",
        "-d",
        "1s",
        "-c",
        "4",
        "-t",
        "2",
        "--max-concurrent-streams",
        "4",
        "--no-watch",
        &caddy.https_url("/91k.bin"),
    ]);
    let log = caddy.log();
    let responses = u(&run, "results.responses");
    let in_flight = u(&run, "results.in_flight_at_end");
    assert!(responses > 0);
    assert_no_errors(&run);
    all_h3(&log);
    // Every response counted is a request Caddy logged whole; a request cut off at the
    // deadline may be logged too (Caddy logs it when its stream ends), never more than
    // were in flight.
    let whole = log.iter().filter(|l| l.status == 200).count() as u64;
    assert!(
        whole >= responses && (log.len() as u64) <= responses + in_flight,
        "{responses} responses + {in_flight} in flight, {} logged ({whole} whole)",
        log.len()
    );
    assert!(in_flight <= 16, "{in_flight} in flight for 4 × 4 streams");
    let timeline: u64 = run["results"]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["responses"].as_u64().unwrap())
        .sum();
    assert_eq!(timeline, responses);
}

#[test]
fn a_mix_of_targets_over_http3_matches_the_log_per_path() {
    let caddy = Caddy::start("");
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.jsonl");
    std::fs::write(
        &targets,
        "{\"url\": \"/1k.txt\", \"weight\": 3}\n{\"url\": \"/91k.bin\"}\n{\"url\": \"/missing.txt\"}\n",
    )
    .unwrap();
    let run = run_json(&[
        "--h3",
        "-k",
        "-n",
        "1000",
        "-c",
        "3",
        "-t",
        "1",
        "--max-concurrent-streams",
        "5",
        "--no-watch",
        "--targets",
        targets.to_str().unwrap(),
        &caddy.https_url("/"),
    ]);
    let log = caddy.log();
    assert_eq!(u(&run, "results.responses"), 1000);
    assert_no_errors(&run);
    assert_eq!(log.len(), 1000);
    all_h3(&log);
    let mut by_path: HashMap<&str, u64> = HashMap::new();
    for l in &log {
        *by_path.entry(l.uri.as_str()).or_default() += 1;
    }
    let eps = run["results"]["endpoints"].as_array().unwrap();
    assert_eq!(eps.len(), 3);
    for ep in eps {
        let name = ep["name"].as_str().unwrap();
        let path = name.split_whitespace().last().unwrap();
        assert_eq!(
            ep["responses"].as_u64().unwrap(),
            by_path.get(path).copied().unwrap_or(0),
            "{name}"
        );
    }
    // Weights 3:1:1 over 1000 requests in the seeded order.
    assert!(by_path["/1k.txt"] > 500 && by_path["/91k.bin"] > 100);
    let missing = log.iter().filter(|l| l.status == 404).count() as u64;
    assert_eq!(missing, by_path["/missing.txt"]);
    assert_eq!(status_codes(&run).get(&404).copied(), Some(missing));
    let remotes: HashSet<&str> = log.iter().map(|l| l.remote.as_str()).collect();
    assert_eq!(remotes.len(), 1, "one worker thread: one UDP socket");
}

#[test]
fn bad_combinations_are_refused() {
    for (args, says) in [
        (vec!["--h3", "http://127.0.0.1:1/"], "https://"),
        (vec!["--h3", "--h2", "https://127.0.0.1:1/"], "--h2"),
        (vec!["--h3", "--h1", "https://127.0.0.1:1/"], "--h1"),
        (
            vec!["--h3", "--io", "uring", "https://127.0.0.1:1/"],
            "--io uring",
        ),
        (vec!["--h3", "-R", "100", "https://127.0.0.1:1/"], "--rate"),
    ] {
        let out = loadlens()
            .arg("run")
            .args(["-n", "1", "--no-watch"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_port_without_http3_is_refused_with_a_hint() {
    // A UDP port nobody listens on: no QUIC handshake within the timeout.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    drop(sock);
    let out = loadlens()
        .arg("run")
        .args(["--h3", "-k", "-n", "1", "--no-watch", "--timeout", "300ms"])
        .arg(format!("https://localhost:{port}/"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("HTTP/3") || err.contains("QUIC"), "{err}");
}
