//! The diagnosis on server set-ups the lab does not build, against real nginx on
//! loopback: its own rate limit (refusing with 429 or 503, or holding requests to its
//! rate), a keep-alive policy that closes every connection, a slow upstream whose
//! accept queue overflows, workers pinned to fewer CPUs than they are, static files
//! copied through small output buffers with sendfile off. Each must be the
//! first bottleneck, named in the server's own terms. The loads are open-loop at a few
//! thousand requests/s where a closed loop would keep the CPUs busy: the finding must
//! not depend on what else the machine runs.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{run_json, status_codes, Nginx};
use serde_json::Value;

fn first_bottleneck(run: &Value) -> &Value {
    run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "bottleneck")
        .unwrap_or_else(|| panic!("no bottleneck: {:#}", run["findings"]))
}

fn fact(f: &Value, name: &str) -> f64 {
    f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_f64())
        .unwrap_or_else(|| panic!("no fact {name}: {f:#}"))
}

#[test]
fn limit_req_refusing_with_429_is_the_bottleneck_with_its_zone() {
    let ng = Nginx::start(
        "limit_req_zone $binary_remote_addr zone=ll_refuse:1m rate=50r/s;",
        "location / { limit_req zone=ll_refuse burst=10 nodelay; limit_req_status 429; }",
    );
    let run = run_json(&[
        &ng.url("/1k.txt"),
        "-c",
        "10",
        "-t",
        "1",
        "-d",
        "2s",
        "-R",
        "2000",
    ]);
    assert!(status_codes(&run)[&429] > 100, "{}", run["results"]);
    let f = first_bottleneck(&run);
    assert_eq!(f["id"], "rate-limited", "{:#}", run["findings"]);
    let title = f["title"].as_str().unwrap();
    assert!(
        title.contains("`limit_req` (zone \"ll_refuse\")"),
        "{title}"
    );
    let why = f["explanation"].as_str().unwrap();
    assert!(why.contains("rate=50r/s"), "{why}");
    assert!(why.contains("limiting requests, excess"), "{why}");
    // What got through is the limit's rate (50/s, and the burst of 10 once).
    let served = fact(f, "responses served per second");
    assert!((30.0..=80.0).contains(&served), "{served}");
    // The server's CPU went to refusing: a consequence, not the finding.
    assert!(run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] != "server-cpu-saturated" || f["kind"] != "bottleneck"));
}

#[test]
fn limit_req_refusing_with_its_default_503_is_named_from_the_error_log() {
    let ng = Nginx::start(
        "limit_req_zone $binary_remote_addr zone=ll_503:1m rate=50r/s;",
        "location / { limit_req zone=ll_503; }",
    );
    let run = run_json(&[
        &ng.url("/1k.txt"),
        "-c",
        "10",
        "-t",
        "1",
        "-d",
        "2s",
        "-R",
        "2000",
    ]);
    assert!(status_codes(&run)[&503] > 100, "{}", run["results"]);
    let f = first_bottleneck(&run);
    assert_eq!(f["id"], "rate-limited", "{:#}", run["findings"]);
    assert!(fact(f, "error log lines \"limiting-requests\"") > 0.0);
    // The errors finding quotes the same log line instead of "see the error log".
    let errors = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "http-errors")
        .unwrap();
    assert!(errors["explanation"]
        .as_str()
        .unwrap()
        .contains("limiting requests"));
}

#[test]
fn limit_req_without_nodelay_holds_the_run_to_its_rate() {
    // Nothing is refused or logged at warn: requests wait and leave at 400/s.
    let ng = Nginx::start(
        "limit_req_zone $binary_remote_addr zone=ll_pace:1m rate=400r/s;",
        "location / { limit_req zone=ll_pace burst=20; }",
    );
    let run = run_json(&[&ng.url("/1k.txt"), "-c", "8", "-t", "1", "-d", "3s"]);
    assert_eq!(run["results"]["non_2xx_3xx"], 0, "{}", run["results"]);
    let f = first_bottleneck(&run);
    assert_eq!(f["id"], "rate-limited", "{:#}", run["findings"]);
    let rate = fact(f, "responses per second");
    assert!((360.0..=460.0).contains(&rate), "{rate}");
    assert_eq!(fact(f, "the zone's rate"), 400.0);
}

#[test]
fn a_server_closing_every_connection_is_named_with_its_keepalive_setting() {
    let ng = Nginx::start("keepalive_timeout 0;", "");
    let run = run_json(&[
        &ng.url("/1k.txt"),
        "-c",
        "10",
        "-t",
        "1",
        "-d",
        "2s",
        "-R",
        "3000",
    ]);
    let f = first_bottleneck(&run);
    assert_eq!(f["id"], "new-connection-cost", "{:#}", run["findings"]);
    assert!(
        f["title"]
            .as_str()
            .unwrap()
            .contains("although the client kept it alive"),
        "{f:#}"
    );
    assert!(
        f["fix"].as_str().unwrap().contains("`keepalive_timeout 0`"),
        "{f:#}"
    );
    // With keep-alive allowed, the same load opens each connection once.
    let ng = Nginx::start("", "");
    let run = run_json(&[
        &ng.url("/1k.txt"),
        "-c",
        "10",
        "-t",
        "1",
        "-d",
        "2s",
        "-R",
        "3000",
    ]);
    assert_eq!(
        run["results"]["connections_opened"], 10,
        "{}",
        run["results"]
    );
    assert!(run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] != "new-connection-cost"));
}

/// A backend that accepts one connection every 50 ms from a queue of 4: whatever the
/// machine's speed, a proxy with 20 requests in flight overflows it. Killed on drop.
struct SlowBackend {
    child: Child,
    port: u16,
}

impl SlowBackend {
    fn start() -> SlowBackend {
        let script = r#"
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
print(s.getsockname()[1], flush=True)
end = time.time() + 60
while time.time() < end:
    c, _ = s.accept()
    time.sleep(0.05)
    c.recv(65536)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    c.close()
"#;
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        SlowBackend {
            port: line.trim().parse().unwrap(),
            child,
        }
    }
}

impl Drop for SlowBackend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_slow_upstreams_accept_queue_is_watched_and_named() {
    let up = SlowBackend::start();
    let ng = Nginx::start(
        "",
        &format!(
            "location / {{ proxy_pass http://127.0.0.1:{}; proxy_connect_timeout 1s; proxy_read_timeout 1s; }}",
            up.port
        ),
    );
    let run = run_json(&[&ng.url("/"), "-c", "20", "-t", "1", "-d", "3s"]);
    let addr = format!("127.0.0.1:{}", up.port);
    let ev = &run["evidence"];
    assert!(
        ev["topology"]["upstream_listeners"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["addr"] == addr.as_str()),
        "{:#}",
        ev["topology"]
    );
    let q = ev["window"]["listen_queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["addr"] == addr.as_str())
        .unwrap_or_else(|| panic!("{addr} not watched: {:#}", ev["window"]["listen_queues"]));
    assert!(q["max_queue"].as_u64().unwrap() >= 3, "{q}");
    let f = first_bottleneck(&run);
    assert!(
        ["listen-queue-overflow", "upstream-saturated"].contains(&f["id"].as_str().unwrap()),
        "{:#}",
        run["findings"]
    );
    assert!(f["title"].as_str().unwrap().contains(&addr), "{f:#}");
}

#[test]
fn an_upstream_that_refuses_is_quoted_and_the_cpu_of_answering_502s_is_no_bottleneck() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ng = Nginx::start(
        "",
        &format!("location / {{ proxy_pass http://127.0.0.1:{closed}; }}"),
    );
    let run = run_json(&[
        &ng.url("/"),
        "-c",
        "10",
        "-t",
        "1",
        "-d",
        "2s",
        "-R",
        "2000",
    ]);
    assert!(status_codes(&run)[&502] > 100, "{}", run["results"]);
    let findings = run["findings"].as_array().unwrap();
    let errors = findings.iter().find(|f| f["id"] == "http-errors").unwrap();
    assert!(
        errors["explanation"]
            .as_str()
            .unwrap()
            .contains("Connection refused"),
        "{errors:#}"
    );
    assert!(
        findings
            .iter()
            .all(|f| f["id"] != "server-cpu-saturated" || f["kind"] == "info"),
        "{findings:#?}"
    );
}

#[test]
fn workers_pinned_to_fewer_cpus_than_they_are_take_turns_and_are_told_to_spread() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        common::skip_or_fail("one CPU: no CPU can be closed to the workers");
        return;
    }
    // One worker per CPU, every one of them pinned to CPU 0.
    let masks = vec!["1"; cpus].join(" ");
    let ng = Nginx::start_opts(
        None,
        "127.0.0.1",
        &format!("worker_processes {cpus}; worker_cpu_affinity {masks};"),
        "",
        "",
        "",
    );
    let run = run_json(&[&ng.url("/1k.txt"), "-c", "20", "-d", "2s"]);
    let spread = format!("`worker_cpu_affinity auto;` (now `worker_cpu_affinity {masks}`)");
    // The first finding about the server names the crowding: as the workers'
    // saturation, or — with another process on CPU 0 too (a busy host) — as their wait
    // for it, whose fix still says the workers take turns. (A load generator starved by
    // tests beside this one comes before it, as designed.)
    let first = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] != "client-saturated")
        .unwrap_or_else(|| panic!("{:#}", run["findings"]));
    let fix = first["fix"].as_str().unwrap();
    match first["id"].as_str().unwrap() {
        "server-cpu-saturated" => {
            let title = first["title"].as_str().unwrap();
            assert!(
                title.contains(&format!(
                    "{cpus} workers take turns on 1 CPU of the machine's"
                )),
                "{title}"
            );
            assert!(fix.starts_with(&spread), "{first:#}");
        }
        "run-queue-delay" => assert!(fix.contains(&spread), "{first:#}"),
        _ => panic!("{:#}", run["findings"]),
    }
}

#[test]
fn static_files_copied_through_small_output_buffers_are_told_sendfile_on() {
    let run_200k = |server_extra: &str| {
        let ng = Nginx::start("", server_extra);
        let big = ng.root().join("html/200k.bin");
        std::fs::write(&big, vec![b'x'; 204_800]).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o644)).unwrap();
        run_json(&[&ng.url("/200k.bin"), "-c", "10", "-d", "2s"])
    };
    let run = run_200k("output_buffers 1 4k;");
    let f = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "sendfile-off")
        .unwrap_or_else(|| panic!("{:#}", run["findings"]));
    assert_eq!(f["kind"], "bottleneck", "{f:#}");
    // 200 KiB in 4 KiB pieces.
    let reads = fact(f, "file reads per response");
    assert!((40.0..=60.0).contains(&reads), "{f:#}");
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("`sendfile on;`") && fix.contains("(now `output_buffers 1 4k`)"),
        "{fix}"
    );
    // With sendfile the file never passes through nginx's buffers: nothing to say.
    let on = run_200k("sendfile on; output_buffers 1 4k;");
    assert!(
        on["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["id"] != "sendfile-off"),
        "{:#}",
        on["findings"]
    );
}
