//! Exactness against real nginx: every response loadlens counts is one nginx logged,
//! every byte it counts is one nginx sent, and connections are reused as asked.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};

use common::{percentile_us, run_json, stall_worker, status_codes, u, Nginx};
use serde_json::Value;

/// `loadlens run ARGS --io IO`, checked to have run on that I/O backend (or, where the
/// kernel refuses io_uring, on the epoll fallback it announced).
fn run_io(io: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["--io", io]);
    let run = run_json(&args);
    if io == "uring" {
        common::ran_on_io_uring(&run);
    } else {
        assert_eq!(run["results"]["io"], "epoll");
    }
    run
}

/// Each exactness test below runs on both I/O backends: `NAME::io_uring`, `NAME::epoll`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn io_uring() {
                    super::$name("uring")
                }
                #[test]
                fn epoll() {
                    super::$name("epoll")
                }
            }
        )*
    };
}

on_both_backends!(
    keep_alive_counts_and_bytes_match_the_access_log,
    connreqs_1_opens_one_connection_per_request,
    connreqs_4_opens_a_quarter,
    status_codes_match_including_404s,
    chunked_gzip_responses_are_framed,
    large_bodies_and_head_requests,
    duration_run_counts_at_most_what_nginx_served,
    server_connection_close_is_honoured,
    a_timed_run_accounts_for_the_requests_in_flight_at_the_end,
);

fn keep_alive_counts_and_bytes_match_the_access_log(io: &str) {
    let ng = Nginx::start("", "");
    let run = run_io(
        io,
        &["-n", "3000", "-c", "12", "-t", "2", &ng.url("/1k.txt")],
    );
    let log = ng.log();
    assert_eq!(u(&run, "results.responses"), 3000);
    assert_eq!(log.len(), 3000, "nginx logged every request, no more");
    assert_eq!(
        u(&run, "results.bytes_read"),
        log.iter().map(|l| l.bytes_sent).sum::<u64>()
    );
    assert_eq!(status_codes(&run).get(&200), Some(&3000));
    assert_eq!(
        run["results"]["errors"],
        serde_json::json!({"connect":0,"read":0,"write":0,"timeout":0,"parse":0,"reset":0})
    );
    // Keep-alive: at most one connection per configured connection.
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(conns.len() as u64, u(&run, "results.connections_opened"));
    assert!(conns.len() <= 12, "{} connections for -c 12", conns.len());
}

fn connreqs_1_opens_one_connection_per_request(io: &str) {
    let ng = Nginx::start("", "");
    let run = run_io(
        io,
        &[
            "-n",
            "600",
            "-c",
            "10",
            "-t",
            "2",
            "--connreqs",
            "1",
            &ng.url("/1k.txt"),
        ],
    );
    let log = ng.log();
    assert_eq!(u(&run, "results.responses"), 600);
    assert_eq!(log.len(), 600);
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(conns.len(), 600, "each request on its own TCP connection");
    assert_eq!(u(&run, "results.connections_opened"), 600);
    assert!(log.iter().all(|l| l.connection_requests == 1));
}

fn connreqs_4_opens_a_quarter(io: &str) {
    let ng = Nginx::start("", "");
    let c = 8u64;
    let run = run_io(
        io,
        &[
            "-n",
            "800",
            "-c",
            "8",
            "-t",
            "2",
            "--connreqs",
            "4",
            &ng.url("/1k.txt"),
        ],
    );
    let log = ng.log();
    assert_eq!(u(&run, "results.responses"), 800);
    assert_eq!(log.len(), 800);
    let mut per_conn: HashMap<u64, u64> = HashMap::new();
    for l in &log {
        *per_conn.entry(l.connection).or_default() += 1;
    }
    let n = per_conn.len() as u64;
    assert_eq!(n, u(&run, "results.connections_opened"));
    // 800 / 4 = 200 connections; when the budget runs out, each of the c connections
    // may be cut short once, so at most c more.
    assert!((200..200 + c).contains(&n), "{n} connections");
    assert!(per_conn.values().all(|&k| k <= 4));
    let full = per_conn.values().filter(|&&k| k == 4).count() as u64;
    assert!(full >= 200 - c, "{full} connections served all 4 requests");
}

fn status_codes_match_including_404s(io: &str) {
    // About a third of requests get a 404, chosen at random per request.
    let ng = Nginx::start(
        r#"split_clients "${request_id}" $missing { 33% yes; * no; }"#,
        r#"location / { if ($missing = yes) { return 404; } }"#,
    );
    let run = run_io(
        io,
        &["-n", "1500", "-c", "6", "-t", "2", &ng.url("/1k.txt")],
    );
    let log = ng.log();
    let logged_404 = log.iter().filter(|l| l.status == 404).count() as u64;
    let logged_200 = log.iter().filter(|l| l.status == 200).count() as u64;
    assert!(logged_404 > 100 && logged_200 > 100, "{logged_404} 404s");
    let codes = status_codes(&run);
    assert_eq!(codes.get(&404).copied().unwrap_or(0), logged_404);
    assert_eq!(codes.get(&200).copied().unwrap_or(0), logged_200);
    assert_eq!(u(&run, "results.non_2xx_3xx"), logged_404);
    assert_eq!(
        u(&run, "results.bytes_read"),
        log.iter().map(|l| l.bytes_sent).sum::<u64>()
    );
}

fn chunked_gzip_responses_are_framed(io: &str) {
    let ng = Nginx::start("gzip on; gzip_min_length 0; gzip_types text/plain;", "");
    // Check nginx really chunks this response, or the test proves nothing.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", ng.port)).unwrap();
    s.write_all(
        b"GET /1k.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let resp = String::from_utf8_lossy(&raw);
    assert!(
        resp.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{resp}"
    );

    let run = run_io(
        io,
        &[
            "-n",
            "2000",
            "-c",
            "8",
            "-t",
            "2",
            "-H",
            "Accept-Encoding: gzip",
            &ng.url("/1k.txt"),
        ],
    );
    let log = ng.log();
    assert_eq!(u(&run, "results.responses"), 2000);
    assert_eq!(log.len(), 2001, "2000 from loadlens + the check above");
    assert_eq!(u(&run, "results.errors.parse"), 0);
    let sent: u64 = log.iter().skip(1).map(|l| l.bytes_sent).sum();
    assert_eq!(u(&run, "results.bytes_read"), sent);
}

fn large_bodies_and_head_requests(io: &str) {
    let ng = Nginx::start("", "");
    let run = run_io(
        io,
        &["-n", "300", "-c", "4", "-t", "1", &ng.url("/91k.bin")],
    );
    let log = ng.log();
    assert_eq!(u(&run, "results.responses"), 300);
    assert_eq!(
        u(&run, "results.bytes_read"),
        log.iter().map(|l| l.bytes_sent).sum::<u64>()
    );
    assert!(u(&run, "results.bytes_read") > 300 * 93_184);

    let run = run_io(
        io,
        &[
            "-n",
            "200",
            "-c",
            "4",
            "-t",
            "1",
            "-X", // curl's spelling of -m
            "HEAD",
            &ng.url("/91k.bin"),
        ],
    );
    assert_eq!(u(&run, "results.responses"), 200);
    assert_eq!(u(&run, "results.errors.timeout"), 0);
    assert!(
        u(&run, "results.bytes_read") < 200 * 1000,
        "HEAD responses carry no body"
    );
}

fn duration_run_counts_at_most_what_nginx_served(io: &str) {
    let ng = Nginx::start("", "");
    let run = run_io(
        io,
        &[
            "-d",
            "1s",
            "-c",
            "8",
            "-t",
            "2",
            "--no-probe",
            &ng.url("/1k.txt"),
        ],
    );
    let log = ng.log();
    let got = u(&run, "results.responses");
    assert!(got > 100);
    // Requests in flight at the deadline are served by nginx but not counted.
    assert!(
        log.len() as u64 >= got && log.len() as u64 <= got + 8,
        "{} vs {got}",
        log.len()
    );
    let d = run["results"]["duration_s"].as_f64().unwrap();
    assert!((0.95..1.2).contains(&d), "window {d}s");
    let timeline = run["results"]["timeline"].as_array().unwrap();
    let in_timeline: u64 = timeline
        .iter()
        .map(|s| s["responses"].as_u64().unwrap())
        .sum();
    assert_eq!(in_timeline, got, "the timeline accounts for every response");
}

fn server_connection_close_is_honoured(io: &str) {
    // keepalive_requests 3: nginx sends `Connection: close` on every third response.
    let ng = Nginx::start("", "keepalive_requests 3;");
    let run = run_io(io, &["-n", "300", "-c", "3", "-t", "1", &ng.url("/1k.txt")]);
    assert_eq!(u(&run, "results.responses"), 300);
    assert_eq!(run["results"]["errors"]["read"], 0);
    assert!(u(&run, "results.connections_opened") >= 100);
}

#[test]
fn https_with_insecure() {
    let ng = Nginx::start_tls("", "ssl");
    let url = ng.https_url("/1k.txt");
    let run = run_json(&["-n", "500", "-c", "4", "-t", "2", "--insecure", &url]);
    assert_eq!(u(&run, "results.responses"), 500);
    assert_eq!(ng.log().len(), 500);
    assert!(u(&run, "results.connect_time.count") >= 4);
    assert_eq!(
        u(&run, "results.errors.read") + u(&run, "results.errors.parse"),
        0
    );
    // Responses ended at their kernel arrival time (through rustls's reads), the loop's
    // wait for them recorded apart (the first of a run may come before the kernel
    // timestamps segments: see tests/engine_h2.rs).
    let held = u(&run, "results.phases.held.count");
    assert!(held > 0 && held <= 500, "{held}");
    // A connection per request over TLS: each response read to the server's
    // close_notify and FIN, none lost or counted twice.
    let run = run_json(&[
        "-n",
        "60",
        "-c",
        "3",
        "-t",
        "1",
        "--connreqs",
        "1",
        "-k",
        &url,
    ]);
    assert_eq!(u(&run, "results.responses"), 60);
    assert_eq!(u(&run, "results.connections_opened"), 60);
    assert_eq!(ng.log().len(), 560);
    // Without --insecure the self-signed certificate is refused before any load, with
    // the way out in the message.
    let out = common::loadlens()
        .args(["run", "-d", "0.5s", "-c", "2", "-t", "1", &url])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("TLS handshake with") && err.contains("use --insecure (-k)"),
        "{err}"
    );
    assert_eq!(ng.log().len(), 560, "no request was sent");
}

#[test]
fn open_loop_keeps_the_rate_and_shows_what_closed_loop_hides() {
    let ng = Nginx::start("access_log off;", "");
    let url = ng.url("/1k.txt");
    let open_loop = [
        "-R",
        "1000",
        "-d",
        "2s",
        "-c",
        "10",
        "-t",
        "2",
        "--no-watch",
        &url,
    ];
    let run = run_json(&open_loop);
    let n = u(&run, "results.responses");
    assert!(
        (1900..=2000).contains(&n),
        "{n} responses at 1000/s for 2 s"
    );
    assert_eq!(
        run["results"]["latency"]["corrected_for_coordinated_omission"],
        true
    );
    assert_eq!(run["spec"]["rate"], 1000.0);

    // A 500 ms stall: closed loop, only the 10 requests in flight wait, so p99 stays low
    // (coordinated omission); open loop, the ~500 requests due during the stall all wait.
    let stall = stall_worker(&ng, 500, 500);
    let closed = run_json(&["-d", "2s", "-c", "10", "-t", "2", "--no-watch", &url]);
    stall.join().unwrap();
    let stall = stall_worker(&ng, 500, 500);
    let open = run_json(&open_loop);
    stall.join().unwrap();
    assert!(
        percentile_us(&closed, 99.0) < 50_000,
        "closed-loop p99 {}us",
        percentile_us(&closed, 99.0)
    );
    assert!(
        percentile_us(&open, 99.0) > 200_000,
        "open-loop p99 {}us",
        percentile_us(&open, 99.0)
    );
    assert_eq!(
        closed["results"]["latency"]["corrected_for_coordinated_omission"],
        false
    );
}

/// A timed run: every request nginx logged is either a response loadlens counted or
/// one it reports as in flight when time was up (before, those `-c` requests vanished).
fn a_timed_run_accounts_for_the_requests_in_flight_at_the_end(io: &str) {
    let ng = Nginx::start("", "");
    let run = run_io(
        io,
        &[
            "-d",
            "3s",
            "-c",
            "20",
            "-t",
            "2",
            "--no-probe",
            &ng.url("/1k.txt"),
        ],
    );
    // nginx writes the log line of an interrupted request when it notices the close.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let log = ng.log();
    let responses = u(&run, "results.responses");
    let in_flight = u(&run, "results.in_flight_at_end");
    assert!(in_flight > 0 && in_flight <= 20, "{in_flight}");
    assert_eq!(
        responses + in_flight,
        log.len() as u64,
        "responses {responses} + in flight {in_flight} vs {} log lines",
        log.len()
    );
}
