//! A small misbehaving server: malformed responses, truncated bodies, closes mid-way,
//! silence. The run must count each as the right error class, never crash or hang.

mod common;

use std::io::Write;

use common::bad_server::{hold_until_client_closes, measured_run, BadServer};
use common::{run_json, u, HANG};

#[test]
fn malformed_status_line_is_a_parse_error() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n");
        true
    });
    let run = run_json(&["-n", "50", "-c", "2", "-t", "1", &s.url()]);
    assert_eq!(u(&run, "results.responses"), 0);
    assert_eq!(u(&run, "results.errors.parse"), 50);
}

#[test]
fn truncated_body_is_a_parse_error() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly fifty bytes ........................");
        false // close with the body unfinished
    });
    let run = run_json(&["-n", "40", "-c", "2", "-t", "1", &s.url()]);
    assert_eq!(u(&run, "results.responses"), 0);
    assert_eq!(u(&run, "results.errors.parse"), 40);
}

#[test]
fn close_mid_head_is_a_parse_error_and_close_before_response_a_read_error() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Le");
        false
    });
    let run = run_json(&["-n", "30", "-c", "2", "-t", "1", &s.url()]);
    assert_eq!(u(&run, "results.errors.parse"), 30);

    let s = BadServer::start(|_| false);
    let run = run_json(&["-n", "30", "-c", "2", "-t", "1", &s.url()]);
    assert_eq!(u(&run, "results.responses"), 0);
    assert_eq!(u(&run, "results.errors.read"), 30);
}

#[test]
fn silent_server_times_out_and_the_run_ends_on_time() {
    // Never answers, and holds every connection until the client gives up: a run
    // against it ends only by its own deadline and timeouts.
    let s = BadServer::start(hold_until_client_closes);
    // Killed (and failed) if it has not ended within `HANG`: a run that waited for the
    // server would never end.
    let m = measured_run(
        &[
            "-d",
            "2s",
            "--timeout",
            "300ms",
            "-c",
            "4",
            "-t",
            "2",
            &s.url(),
        ],
        HANG,
    );
    let run = &m.run;
    let r = &run["results"];
    assert_eq!(u(run, "results.responses"), 0, "{r}");
    let (timeouts, in_flight) = (
        u(run, "results.errors.timeout"),
        u(run, "results.in_flight_at_end"),
    );
    assert_eq!(
        timeouts + in_flight,
        sent(run),
        "every request sent timed out or was in flight at the end: {r}"
    );
    assert!(timeouts >= 1, "no request timed out: {r}");
    // Each time-out closes its connection and opens the next: the server saw every
    // connection and every request the client counted, no more (counted once the
    // client has gone and every connection has ended). One more connection: the probe
    // before the load, which sends nothing.
    let opened = u(run, "results.connections_opened");
    s.settle(opened + 1);
    assert_eq!(s.accepted(), opened + 1, "{r}");
    assert_eq!(s.requests(), timeouts + in_flight, "{r}");
    assert!(opened <= timeouts + 4 && opened >= timeouts, "{r}");
    // Not early: a connection cannot time out more often than once per 300 ms of the
    // run (a slow machine only makes it fewer).
    let most = (4.0 * run["results"]["duration_s"].as_f64().unwrap() / 0.3).floor() as u64;
    assert!(timeouts <= most, "{timeouts} timeouts > {most}: {r}");

    // With -n, each timed-out request counts toward N, so the run ends too.
    let m = measured_run(
        &[
            "-n",
            "6",
            "--timeout",
            "200ms",
            "-c",
            "3",
            "-t",
            "1",
            &s.url(),
        ],
        HANG,
    );
    assert_eq!(u(&m.run, "results.errors.timeout"), 6);
}

/// Requests sent: responses + errors of every class + in flight at the end.
fn sent(run: &serde_json::Value) -> u64 {
    u(run, "results.responses")
        + ["connect", "read", "write", "timeout", "parse"]
            .iter()
            .map(|k| u(run, &format!("results.errors.{k}")))
            .sum::<u64>()
        + u(run, "results.in_flight_at_end")
}

#[test]
fn server_close_after_each_response_is_not_an_error() {
    // HTTP/1.0 close-delimited body, then the server closes.
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.0 200 OK\r\nServer: old\r\n\r\nbody until close");
        false
    });
    let run = run_json(&["-n", "100", "-c", "4", "-t", "2", &s.url()]);
    assert_eq!(u(&run, "results.responses"), 100);
    assert_eq!(
        u(&run, "results.errors.read") + u(&run, "results.errors.parse"),
        0
    );
    assert_eq!(u(&run, "results.connections_opened"), 100);

    // `Connection: close` on an HTTP/1.1 response with a length.
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        false
    });
    let run = run_json(&["-n", "100", "-c", "4", "-t", "2", &s.url()]);
    assert_eq!(u(&run, "results.responses"), 100);
    assert_eq!(run["results"]["errors"]["read"], 0);
}

#[test]
fn any_three_digit_status_is_kept_as_sent_and_two_digits_are_not_http() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n");
        true
    });
    let run = run_json(&["-n", "20", "-c", "2", "-t", "1", &s.url()]);
    assert_eq!(
        run["results"]["status_codes"]["999"], 20,
        "{}",
        run["results"]["status_codes"]
    );
    assert!(run["results"]["status_codes"].get("599").is_none());
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n");
        true
    });
    let run = run_json(&["-n", "20", "-c", "2", "-t", "1", &s.url()]);
    assert_eq!(u(&run, "results.responses"), 0);
    assert_eq!(u(&run, "results.errors.parse"), 20);
}

/// A keep-alive server that closes an idle connection without `Connection: close`
/// (its keepalive_timeout or keepalive_requests): the next request on it meets a
/// close before any byte. That is the server's normal behaviour, not a failure: it is
/// counted apart and the request sent again on a new connection. (Before: one read
/// error per response.)
#[test]
fn keep_alive_ended_by_the_server_is_not_an_error() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        false // close after one response, without saying so
    });
    let run = run_json(&["-n", "200", "-c", "4", "-t", "1", &s.url()]);
    assert_eq!(u(&run, "results.responses"), 200);
    assert_eq!(
        run["results"]["errors"],
        serde_json::json!({"connect":0,"read":0,"write":0,"timeout":0,"parse":0,"reset":0})
    );
    let closed = u(&run, "results.keepalive_closed");
    assert!((150..=200).contains(&closed), "{closed}");
}
