//! The hostile-server suite: a server that does what no good server does (never ends a
//! body, trickles a byte a second, sends 64 MiB, two responses for one request, a TLS
//! alert to a cleartext request, …). Whatever it does, loadlens must end on time
//! (duration + timeout + 1 s), stay small (peak RSS of the process, from `wait4`),
//! count every request in the right class, and never panic. `tests/engine_misbehave.rs`
//! has the first behaviours (garbage status line, cut bodies, silence, status 999,
//! keep-alive ended without a header).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::bad_server::{hold_until_client_closes, measured_run, reset, BadServer, Measured};
use common::{output_within, u, HANG};

/// Peak memory allowed: generous (the process holds a few MB of histograms and
/// buffers); what it catches is memory growing with what the server sends.
const PEAK_RSS: u64 = 100 << 20;

/// A `-d` run of 1 s with a 500 ms timeout against a server that never finishes on its
/// own (it sends forever, or holds the connection until the client leaves): the run
/// can end only by its own deadline and timeout. Asserts it ended (it is killed, and
/// fails, after `HANG`: not a speed bound, a run that waited for the server would
/// never end) and stayed small, and returns it.
fn timed(url: &str) -> Measured {
    let m = measured_run(
        &[
            "-d",
            "1s",
            "--timeout",
            "500ms",
            "-c",
            "2",
            "-t",
            "1",
            "--no-watch",
            url,
        ],
        HANG,
    );
    small(&m);
    m
}

/// A `-n N` run: asserts it stayed small and that every request is accounted for
/// (responses + errors = N).
fn counted(url: &str, n: u64) -> Measured {
    let m = measured_run(
        &[
            "-n",
            &n.to_string(),
            "--timeout",
            "2s",
            "-c",
            "2",
            "-t",
            "1",
            "--no-watch",
            url,
        ],
        Duration::from_secs(60),
    );
    small(&m);
    let r = &m.run;
    assert_eq!(u(r, "results.responses") + errors(r), n, "{}", r["results"]);
    m
}

fn small(m: &Measured) {
    eprintln!("took {:?}, peak RSS {} KB", m.took, m.peak_rss >> 10);
    // The memory was read (every 2 ms) while the run went on: a run of a few ms may end
    // between two readings.
    assert!(
        m.peak_rss > 1 << 20 || m.took < Duration::from_millis(100),
        "no memory reading: {}",
        m.peak_rss
    );
    assert!(m.peak_rss < PEAK_RSS, "peak RSS {} MB", m.peak_rss >> 20);
}

fn errors(r: &serde_json::Value) -> u64 {
    ["connect", "read", "write", "timeout", "parse"]
        .iter()
        .map(|k| u(r, &format!("results.errors.{k}")))
        .sum()
}

/// Only `class` errors, at least one, and no response.
fn only(r: &serde_json::Value, class: &str) {
    let e = &r["results"]["errors"];
    assert_eq!(u(r, "results.responses"), 0, "{}", r["results"]);
    assert!(u(r, &format!("results.errors.{class}")) > 0, "{e}");
    assert_eq!(errors(r), u(r, &format!("results.errors.{class}")), "{e}");
}

#[test]
fn endless_chunked_body_times_out_in_bounded_memory() {
    let s = BadServer::start(|c| {
        let chunk = [b'x'; 4096];
        if c.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .is_err()
        {
            return false;
        }
        while c.write_all(b"1000\r\n").is_ok() && c.write_all(&chunk).is_ok() {
            let _ = c.write_all(b"\r\n");
        }
        false
    });
    let m = timed(&s.url());
    only(&m.run, "timeout");
    // Far more than the peak memory went through: the body is counted past, not kept.
    assert!(
        u(&m.run, "results.bytes_read") > 10 << 20,
        "{}",
        m.run["results"]
    );
}

#[test]
fn a_64_mib_body_is_a_response_read_in_bounded_memory() {
    let s = BadServer::start(|c| {
        let block = vec![b'x'; 1 << 20];
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 67108864\r\n\r\n");
        for _ in 0..64 {
            if c.write_all(&block).is_err() {
                return false;
            }
        }
        true
    });
    let m = counted(&s.url(), 4);
    assert_eq!(u(&m.run, "results.responses"), 4, "{}", m.run["results"]);
    assert!(u(&m.run, "results.bytes_read") >= 4 * (64 << 20));
}

#[test]
fn endless_header_block_is_a_parse_error() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\n");
        while c.write_all(b"X-More: and more and more\r\n").is_ok() {}
        false
    });
    only(&timed(&s.url()).run, "parse");
}

#[test]
fn a_200_kb_header_line_or_status_line_is_a_parse_error() {
    // Larger than the connection's read buffer (128 KiB): a head that can never be
    // parsed whole (one that fits is parsed: httparse sets no length limit).
    let s = BadServer::start(|c| {
        let big = vec![b'a'; 200 << 10];
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nX-Big: ");
        let _ = c.write_all(&big);
        let _ = c.write_all(b"\r\nContent-Length: 0\r\n\r\n");
        true
    });
    only(&counted(&s.url(), 10).run, "parse");
    let s = BadServer::start(|c| {
        let big = vec![b'a'; 200 << 10];
        let _ = c.write_all(b"HTTP/1.1 200 ");
        let _ = c.write_all(&big);
        let _ = c.write_all(b"\r\nContent-Length: 0\r\n\r\n");
        true
    });
    only(&counted(&s.url(), 10).run, "parse");
}

#[test]
fn bad_negative_and_conflicting_content_lengths_are_parse_errors() {
    let bad: [fn(&mut TcpStream) -> bool; 3] = [
        |c| {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello");
            true
        },
        |c| {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello");
            true
        },
        |c| {
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            );
            true
        },
    ];
    for f in bad {
        let s = BadServer::start(f);
        only(&counted(&s.url(), 10).run, "parse");
    }
}

#[test]
fn an_overflowing_or_non_hex_chunk_size_is_a_parse_error() {
    for f in [
        (|c| {
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\nx\r\n0\r\n\r\n",
            );
            true
        }) as fn(&mut TcpStream) -> bool,
        |c| {
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nx\r\n0\r\n\r\n",
            );
            true
        },
    ] {
        let s = BadServer::start(f);
        only(&counted(&s.url(), 10).run, "parse");
    }
}

#[test]
fn one_byte_a_second_times_out_on_time() {
    let s = BadServer::start(|c| {
        for b in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" {
            if c.write_all(&[*b]).is_err() {
                return false;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        true
    });
    only(&timed(&s.url()).run, "timeout");
}

#[test]
fn a_reset_after_the_request_or_mid_response_is_a_read_error() {
    let s = BadServer::start(|c| {
        reset(c.try_clone().unwrap());
        false
    });
    only(&counted(&s.url(), 10).run, "read");
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf");
        std::thread::sleep(Duration::from_millis(20));
        reset(c.try_clone().unwrap());
        false
    });
    only(&counted(&s.url(), 10).run, "read");
}

#[test]
fn endless_interim_responses_time_out() {
    let s = BadServer::start(|c| {
        while c.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_ok() {}
        false
    });
    only(&timed(&s.url()).run, "timeout");
}

#[test]
fn an_interim_response_then_the_final_one_is_one_response() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        );
        true
    });
    let m = counted(&s.url(), 50);
    assert_eq!(u(&m.run, "results.responses"), 50);
    assert_eq!(m.run["results"]["status_codes"]["200"], 50);
    assert_eq!(u(&m.run, "results.unsolicited"), 0);
}

/// Two responses for one request: the first, valid, is counted (it was not, before:
/// the request became a parse error); the second is the server's protocol error,
/// counted apart (`unsolicited`), and the connection is reopened.
#[test]
fn two_responses_for_one_request_count_the_first() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        );
        true
    });
    let m = counted(&s.url(), 40);
    let r = &m.run;
    assert_eq!(u(r, "results.responses"), 40, "{}", r["results"]);
    assert_eq!(errors(r), 0, "{}", r["results"]["errors"]);
    // One write on loopback: both arrive together almost always; a second response read
    // on its own is taken as the next request's (nothing on the wire tells them apart).
    let extra = u(r, "results.unsolicited");
    assert!(extra >= 30, "{extra}");
    assert!(u(r, "results.connections_opened") >= extra);

    // A body longer than its Content-Length: the same (the surplus is not a response).
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok and more");
        true
    });
    let m = counted(&s.url(), 20);
    assert_eq!(u(&m.run, "results.responses"), 20);
    assert!(u(&m.run, "results.unsolicited") >= 15);
}

#[test]
fn an_answer_before_the_request_is_accounted() {
    // The server answers on accept, then closes after reading the request: the early
    // answer is read as the response (nothing on the wire says otherwise); every
    // request is a response or an error, none lost.
    let s = BadServer::start_with(
        Some(|c| {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly");
        }),
        |_| false,
    );
    let m = counted(&s.url(), 30);
    assert!(u(&m.run, "results.responses") > 0, "{}", m.run["results"]);
}

#[test]
fn a_short_content_length_held_open_times_out() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nnot a thousand");
        hold_until_client_closes(c)
    });
    only(&timed(&s.url()).run, "timeout");
}

#[test]
fn a_header_without_a_colon_is_a_parse_error() {
    let s = BadServer::start(|c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 0\r\n\r\n");
        true
    });
    only(&counted(&s.url(), 10).run, "parse");
}

#[test]
fn a_gzip_body_of_garbage_is_still_a_response() {
    // loadlens counts bodies, it does not decode them: the framing is valid.
    let s = BadServer::start(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 8\r\n\r\n\x1f\x8bgarbag",
        );
        true
    });
    let m = counted(&s.url(), 20);
    assert_eq!(u(&m.run, "results.responses"), 20);
}

#[test]
fn a_tls_alert_to_cleartext_is_a_parse_error_and_cleartext_to_tls_a_connect_error() {
    // http:// to a TLS port: the server answers the request with a TLS alert record
    // (protocol_version) and closes.
    let s = BadServer::start(|c| {
        let _ = c.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46]);
        false
    });
    only(&counted(&s.url(), 10).run, "parse");
    // https:// to a cleartext port: the server answers the ClientHello with a 400 and
    // closes. loadlens tries the handshake before any load: one line, exit 2, at once.
    let s = BadServer::start(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        false
    });
    let url = s.url().replace("http://", "https://");
    let mut cmd = common::loadlens();
    cmd.args(["run", "-n", "10", "--timeout", "2s", "--no-watch", &url]);
    let out = output_within(cmd, HANG);
    assert_eq!(out.status.code(), Some(2));
    // At once, before any load: the probe's connection (nothing sent) and the one
    // handshake (the ClientHello, the only bytes read); no request after them.
    s.settle(2);
    assert_eq!((s.accepted(), s.requests()), (2, 1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TLS handshake") && err.lines().count() == 1,
        "{err}"
    );
}
