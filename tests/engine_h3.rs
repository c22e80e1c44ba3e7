//! HTTP/3 exactness against a real Caddy serving HTTP/3 on a loopback UDP port: every
//! response loadlens counts is one Caddy logged as an `HTTP/3.0` request, with `-n`,
//! `-d`, `--connreqs 1` (full, resumed and 0-RTT handshakes), several streams per
//! connection, open loop (`-R`), a mix of targets, a replay and two segments merged; a
//! run over TCP notes Caddy's `Alt-Svc: h3`; bad combinations are refused before any
//! load.

mod common;

use std::collections::{HashMap, HashSet};

use common::{assert_ok, loadlens, run_json, run_json_env, status_codes, u, Caddy, CaddyLine};

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
fn responses_end_at_their_datagrams_arrival_not_when_the_loop_read_them() {
    // The closed loop lets responses gather between its waits when the server is quick
    // (direct.rs): each ends at the kernel's arrival time of the datagram that ended it,
    // and the wait for the loop shows apart as `held`, with the hold and without it
    // (`LOADLENS_H3_HOLD=0`).
    let caddy = Caddy::start("");
    let url = caddy.https_url("/1k.txt");
    let args = [
        "--h3",
        "-k",
        "-n",
        "3000",
        "-c",
        "2",
        "-t",
        "1",
        "--max-concurrent-streams",
        "16",
        "--no-watch",
        &url,
    ];
    for env in [&[][..], &[("LOADLENS_H3_HOLD", "0")]] {
        let run = run_json_env(env, &args);
        assert_eq!(u(&run, "results.responses"), 3000, "{env:?}");
        assert_no_errors(&run);
        assert_eq!(u(&run, "results.latency.count"), 3000);
        assert_eq!(u(&run, "results.phases.ttfb.count"), 3000);
        // Stamped (not the first few of a machine's first stamping socket, which the
        // kernel turns on from a work queue: those end when read, unrecorded in held).
        let held = u(&run, "results.phases.held.count");
        assert!(held > 0 && held <= 3000, "{env:?}: {held}");
        // Read after they arrived, some of them by a measurable time: the end the
        // latency took is not the loop's.
        assert!(u(&run, "results.phases.held.max_us") > 0, "{env:?}");
    }
    assert_eq!(caddy.log().len(), 6000);
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
    // Without --resume every handshake is a full one (the certificate sent each time).
    assert_eq!(u(&run, "results.quic.handshakes_full"), 300);
    assert_eq!(u(&run, "results.quic.handshake_full.count"), 300);
    assert_eq!(u(&run, "results.quic.handshakes_resumed"), 0);
    assert_eq!(u(&run, "results.quic.handshakes_0rtt"), 0);
    assert!(run["results"]["quic"].get("handshake_resumed").is_none());
}

/// A run of 300 requests, a new connection for each, resuming as `resume` asks.
fn connreqs_1(caddy: &Caddy, resume: &str) -> serde_json::Value {
    let run = run_json(&[
        "--h3",
        "-k",
        "-n",
        "300",
        "-c",
        "2",
        "-t",
        "1",
        "--connreqs",
        "1",
        "--resume",
        resume,
        "--no-watch",
        &caddy.https_url("/1k.txt"),
    ]);
    let log = caddy.log();
    assert_eq!(u(&run, "results.responses"), 300);
    assert_no_errors(&run);
    assert_eq!(log.len(), 300, "Caddy logged every request, no more");
    all_h3(&log);
    assert_eq!(u(&run, "results.connections_opened"), 300);
    run
}

/// The handshakes of `results.quic` by kind: full, resumed, 0-RTT.
fn handshakes(q: &serde_json::Value) -> (u64, u64, u64) {
    (
        u(q, "handshakes_full"),
        u(q, "handshakes_resumed"),
        u(q, "handshakes_0rtt"),
    )
}

#[test]
fn connreqs_1_resumes_handshakes_when_asked() {
    let caddy = Caddy::start("");
    let run = connreqs_1(&caddy, "tickets");
    let q = &run["results"]["quic"];
    let (full, resumed, zero) = handshakes(q);
    // Every connection's handshake counted once, by its kind; the first has no ticket
    // (the probe's, at most), later ones take the tickets earlier ones got.
    assert_eq!(full + resumed + zero, 300, "{q}");
    assert!(resumed >= 90, "{full} full, {resumed} resumed");
    assert_eq!(zero, 0, "no 0-RTT unless asked");
    assert_eq!(u(q, "handshake_resumed.count"), resumed);
    assert_eq!(run["spec"]["resume"], "tickets");
}

#[test]
fn connreqs_1_sends_0rtt_requests_caddy_accepts() {
    let caddy = Caddy::start("");
    let run = connreqs_1(&caddy, "0rtt");
    let q = &run["results"]["quic"];
    let (full, resumed, zero) = handshakes(q);
    assert_eq!(full + resumed + zero, 300, "{q}");
    // quic-go gives a ticket on a full handshake only: full and 0-RTT ones alternate.
    assert!(zero >= 90, "{full} full, {resumed} resumed, {zero} 0-RTT");
    assert_eq!(u(q, "handshake_0rtt.count"), zero);
    assert_eq!(run["spec"]["resume"], "0rtt");
    // The HTML report's HTTP/3 section counts each kind as the Run does.
    let dir = tempfile::tempdir().unwrap();
    let (file, page) = (dir.path().join("run.json"), dir.path().join("run.html"));
    std::fs::write(&file, run.to_string()).unwrap();
    let out = loadlens()
        .arg("report")
        .arg(&file)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert_ok(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    let section = html
        .split("<h2>HTTP/3 (QUIC)</h2>")
        .nth(1)
        .expect("no HTTP/3 section");
    let section = section.split("<h2>").next().unwrap();
    for (label, n) in [
        ("full handshakes (1-RTT)", full),
        ("resumed handshakes (session ticket)", resumed),
        ("0-RTT handshakes (early data accepted)", zero),
    ] {
        assert!(
            section.contains(&format!("<tr><td>{label}</td><td>{n}")),
            "{label} {n}: {section}"
        );
    }
}

#[test]
fn open_loop_over_http3_keeps_its_schedule_and_matches_the_log() {
    let caddy = Caddy::start("");
    // -n with -R: every request answered and logged once; the 400 requests at 400/s
    // are due over a second (4 connections, each one every 10 ms), so the run cannot
    // end before the last is due however fast Caddy answers.
    let run = run_json(&[
        "--h3",
        "-k",
        "-n",
        "400",
        "-R",
        "400",
        "-c",
        "4",
        "-t",
        "2",
        "--no-watch",
        &caddy.https_url("/1k.txt"),
    ]);
    let log = caddy.log();
    assert_eq!(u(&run, "results.responses"), 400);
    assert_no_errors(&run);
    assert_eq!(log.len(), 400);
    all_h3(&log);
    assert_eq!(run["spec"]["rate"], 400.0);
    assert_eq!(
        run["results"]["latency"]["corrected_for_coordinated_omission"],
        true
    );
    let d = run["results"]["duration_s"].as_f64().unwrap();
    assert!(d >= 0.95, "400 requests due over 1 s done in {d:.3} s");

    // -d with -R: no more requests than the schedule holds (200/s × 2 s, one per
    // connection at the start), each one logged; the rate reached near the one asked.
    let caddy = Caddy::start("");
    let run = run_json(&[
        "--h3",
        "-k",
        "-d",
        "2s",
        "-R",
        "200",
        "-c",
        "4",
        "-t",
        "2",
        "--no-watch",
        &caddy.https_url("/1k.txt"),
    ]);
    let log = caddy.log();
    let responses = u(&run, "results.responses");
    let in_flight = u(&run, "results.in_flight_at_end");
    assert_no_errors(&run);
    all_h3(&log);
    assert!(
        (log.len() as u64) >= responses && (log.len() as u64) <= responses + in_flight,
        "{responses} responses + {in_flight} in flight, {} logged",
        log.len()
    );
    assert!(log.len() <= 404, "{} sent for a schedule of 400", log.len());
    assert!(responses >= 300, "{responses} of 400 scheduled");
}

#[test]
fn a_replay_over_http3_matches_the_log_per_path() {
    let caddy = Caddy::start("");
    let dir = tempfile::tempdir().unwrap();
    // 200 requests 5 ms apart over three paths, replayed twice as fast.
    let path = |i: usize| ["/1k.txt", "/91k.bin", "/1k.txt", "/missing.txt"][i % 4];
    let text: String = (0..200)
        .map(|i| {
            format!(
                "{{\"t\": {:.3}, \"url\": \"{}\"}}\n",
                1000.0 + i as f64 * 0.005,
                path(i)
            )
        })
        .collect();
    let log_file = dir.path().join("replay.jsonl");
    std::fs::write(&log_file, text).unwrap();
    let run = run_json(&[
        "--h3",
        "-k",
        "-c",
        "4",
        "-t",
        "2",
        "--no-watch",
        "--replay",
        log_file.to_str().unwrap(),
        "--speed",
        "2",
        &caddy.https_url("/"),
    ]);
    let log = caddy.log();
    assert_eq!(run["results"]["protocol"], "h3");
    assert_eq!(u(&run, "results.responses"), 200);
    assert_no_errors(&run);
    assert_eq!(log.len(), 200);
    all_h3(&log);
    let mut by_path: HashMap<String, u64> = HashMap::new();
    for l in &log {
        *by_path.entry(l.uri.clone()).or_default() += 1;
    }
    assert_eq!(by_path["/1k.txt"], 100);
    assert_eq!(by_path["/91k.bin"], 50);
    assert_eq!(by_path["/missing.txt"], 50);
    for ep in run["results"]["endpoints"].as_array().unwrap() {
        let name = ep["name"].as_str().unwrap();
        let path = name.split_whitespace().last().unwrap();
        assert_eq!(ep["responses"].as_u64().unwrap(), by_path[path], "{name}");
    }
    assert_eq!(
        run["results"]["latency"]["corrected_for_coordinated_omission"],
        true
    );
    // The log spans 0.995 s, replayed at ×2: no sooner than its last request is due.
    let d = run["results"]["duration_s"].as_f64().unwrap();
    assert!(d >= 0.49, "{d:.3} s");
}

#[test]
fn two_segments_over_http3_merge_exactly() {
    let caddy = Caddy::start("");
    let dir = tempfile::tempdir().unwrap();
    let url = caddy.https_url("/1k.txt");
    let files: Vec<std::path::PathBuf> = ["1/2", "2/2"]
        .iter()
        .enumerate()
        .map(|(i, seg)| {
            let f = dir.path().join(format!("seg{i}.json"));
            let out = loadlens()
                .arg("run")
                .args(["--h3", "-k", "-n", "501", "-c", "4", "-t", "2"])
                .args(["--max-concurrent-streams", "3", "--no-watch", &url])
                .args(["--segment", seg, "-q", "--json"])
                .arg(&f)
                .output()
                .unwrap();
            assert_ok(&out);
            f
        })
        .collect();
    let merged = dir.path().join("merged.json");
    let out = loadlens()
        .arg("merge")
        .args(&files)
        .arg("--json")
        .arg(&merged)
        .output()
        .unwrap();
    assert_ok(&out);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    let log = caddy.log();
    all_h3(&log);
    assert_eq!(log.len(), 501);
    assert_eq!(u(&m, "results.responses"), 501);
    assert_eq!(m["results"]["protocol"], "h3");
    assert_no_errors(&m);
    // Each segment's connections, two each; their QUIC counters added.
    assert_eq!(u(&m, "results.connections_opened"), 4);
    assert_eq!(u(&m, "results.quic.rtt.count"), 4);
    assert_eq!(u(&m, "results.quic.handshakes_full"), 4);
    let segs: Vec<serde_json::Value> = files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    assert_eq!(
        u(&m, "results.quic.packets_sent"),
        segs.iter()
            .map(|s| u(s, "results.quic.packets_sent"))
            .sum::<u64>()
    );
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
fn a_run_over_tcp_notes_the_http3_caddy_offers() {
    let caddy = Caddy::start("");
    for http in ["--h1", "--h2"] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("run.json");
        let page = dir.path().join("run.html");
        let out = loadlens()
            .arg("run")
            .args([http, "-k", "-n", "20", "-c", "2", "-t", "1", "--no-watch"])
            .arg(caddy.https_url("/1k.txt"))
            .arg("--json")
            .arg(&json)
            .arg("--html")
            .arg(&page)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_ok(&out);
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        // Caddy answers over TCP with `Alt-Svc: h3=":PORT"`, its own port.
        assert_eq!(
            u(&run, "results.alt_svc_h3_port"),
            caddy.port as u64,
            "{http}"
        );
        assert!(
            text.contains(&format!("offers HTTP/3 on UDP port {}", caddy.port))
                && text.contains("--h3"),
            "{http}: {text}"
        );
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(
            html.contains(&format!("offers HTTP/3 on UDP port {}", caddy.port)),
            "{http}: the HTML report notes it too"
        );
    }
    let log = caddy.log();
    assert_eq!(log.len(), 40);
    assert!(log.iter().all(|l| l.proto != "HTTP/3.0"));
    // Over HTTP/3 itself, nothing to note.
    let run = run_json(&[
        "--h3",
        "-k",
        "-n",
        "5",
        "--no-watch",
        &caddy.https_url("/1k.txt"),
    ]);
    assert!(run["results"].get("alt_svc_h3_port").is_none());
}

/// `--stages` of rates over HTTP/3: the schedule's requests (0→300/s over 1 s, then
/// 300/s for 1 s: 150 + 300) each sent once at its due time and logged by Caddy; each
/// stage's own count from the timeline. Connection stages are refused (below).
#[test]
fn rate_stages_over_http3_send_the_schedule() {
    let caddy = Caddy::start("");
    let run = run_json(&[
        "--h3",
        "-k",
        "--stages",
        "1s:300,1s:300",
        "-c",
        "4",
        "-t",
        "1",
        "--no-watch",
        &caddy.https_url("/1k.txt"),
    ]);
    let log = caddy.log();
    all_h3(&log);
    assert_no_errors(&run);
    let responses = u(&run, "results.responses");
    let in_flight = u(&run, "results.in_flight_at_end");
    let unsent = u(&run, "results.due_unsent_at_end");
    // Every request of the schedule is accounted (the budget is the schedule's 450): the
    // last ones, due just before the end, may still have been on the wire at it, or (a
    // starved client) not sent yet.
    assert_eq!(
        responses + in_flight + unsent,
        450,
        "{responses} + {in_flight} in flight + {unsent} due unsent"
    );
    assert!(
        (log.len() as u64) >= responses && (log.len() as u64) <= responses + in_flight,
        "{responses} responses + {in_flight} in flight, {} logged",
        log.len()
    );
    assert!(responses >= 430, "{responses} of 450 answered in time");
    let stages = run["results"]["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2, "{stages:?}");
    let rps = |i: usize| stages[i]["target_rps"].as_f64().unwrap();
    assert_eq!((rps(0), rps(1)), (150.0, 300.0));
    let done = |i: usize| u(&stages[i], "requests");
    assert_eq!(done(0) + done(1), responses);
    // A request is sent no earlier than it is due: the ramp's second cannot have
    // finished more than its 150 (a late one counts in the next stage).
    assert!(
        done(0) <= 150 && done(1) >= 280,
        "{} then {}",
        done(0),
        done(1)
    );
    assert_eq!(
        run["results"]["latency"]["corrected_for_coordinated_omission"],
        true
    );
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
        (vec!["--resume", "tickets", "https://127.0.0.1:1/"], "--h3"),
        (
            vec!["--h3", "--resume", "1rtt", "https://127.0.0.1:1/"],
            "--resume",
        ),
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
    // Connection stages (no -n beside --stages): refused before any handshake.
    let out = loadlens()
        .arg("run")
        .args([
            "--h3",
            "--no-watch",
            "--stages",
            "1s:c2",
            "https://127.0.0.1:1/",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("ramp the rate instead"), "{err}");
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
