//! The io_uring backend: chosen by default where the kernel allows it, refused with a
//! one-line note and epoll in its place, kept for what only epoll drives (TLS, HTTP/2),
//! and its batching wait shown apart from the latency.

mod common;

use common::{loadlens, ran_on_io_uring, run_json, u, Nginx};

#[test]
fn io_uring_is_the_default_and_shows_its_batching_wait_apart() {
    let ng = Nginx::start("", "");
    let run = run_json(&["-n", "2000", "-c", "8", "-t", "1", &ng.url("/1k.txt")]);
    assert_eq!(
        run["results"]["io"], "io_uring",
        "{}",
        run["results"]["io_note"]
    );
    assert!(run["results"]["io_note"].is_null());
    assert_eq!(u(&run, "results.responses"), 2000);
    assert_eq!(ng.log().len(), 2000);
    // Every response's wait between the kernel's arrival stamp and the loop.
    assert_eq!(u(&run, "results.phases.held.count"), 2000);
    let epoll = run_json(&["-n", "500", "-c", "4", "--io", "epoll", &ng.url("/1k.txt")]);
    assert_eq!(epoll["results"]["io"], "epoll");
    assert!(epoll["results"]["io_note"].is_null(), "asked for: no note");
    assert!(epoll["results"]["phases"]["held"].is_null());
}

/// A kernel that refuses the ring (simulated): the run goes on over epoll, says so in
/// one line and in the Run, and exits 0.
#[test]
fn a_refused_ring_falls_back_to_epoll_with_a_one_line_note() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = loadlens()
        .env("LOADLENS_NO_IO_URING", "1")
        .args(["run", "-n", "300", "-c", "4", "--io", "uring", "--no-watch"])
        .arg("--json")
        .arg(&json)
        .arg(ng.url("/1k.txt"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let notes: Vec<&str> = text.lines().filter(|l| l.contains("io_uring")).collect();
    assert_eq!(
        notes,
        ["  io_uring unavailable (disabled by LOADLENS_NO_IO_URING): epoll used"],
        "{text}"
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(run["results"]["io"], "epoll");
    assert_eq!(u(&run, "results.responses"), 300);
    assert_eq!(ng.log().len(), 300);
    // The default (no --io) falls back the same way.
    let out = loadlens()
        .env("LOADLENS_NO_IO_URING", "1")
        .args(["run", "-n", "100", "-c", "2", "--no-watch", "--json", "-"])
        .arg(ng.url("/1k.txt"))
        .output()
        .unwrap();
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["results"]["io"], "epoll");
    assert!(run["results"]["io_note"]
        .as_str()
        .unwrap()
        .starts_with("io_uring unavailable"));
}

/// TLS stays on epoll: asked for io_uring by name, the Run says why not.
#[test]
fn tls_runs_on_epoll_and_says_so_when_io_uring_was_asked_for() {
    let ng = Nginx::start_tls("", "ssl");
    let url = ng.https_url("/1k.txt");
    let run = run_json(&["-n", "200", "-c", "2", "--insecure", "--io", "uring", &url]);
    assert_eq!(run["results"]["io"], "epoll");
    assert_eq!(
        run["results"]["io_note"],
        "io_uring drives plain-text HTTP/1.1 only: TLS runs on epoll"
    );
    assert_eq!(u(&run, "results.responses"), 200);
    // By default nothing is said: epoll is simply what TLS uses.
    let run = run_json(&["-n", "100", "-c", "2", "--insecure", &url]);
    assert_eq!(run["results"]["io"], "epoll");
    assert!(run["results"]["io_note"].is_null());
}

/// Large bodies are discarded unread after their head: every byte is still counted, and
/// connections closed by the server mid-stream are not lost.
#[test]
fn large_bodies_discarded_unread_are_counted_to_the_byte() {
    let ng = Nginx::start("", "keepalive_requests 7;");
    let run = run_json(&["-n", "700", "-c", "6", "-t", "2", &ng.url("/91k.bin")]);
    let log = ng.log();
    ran_on_io_uring(&run);
    assert_eq!(u(&run, "results.responses"), 700);
    assert_eq!(log.len(), 700);
    assert_eq!(
        u(&run, "results.bytes_read"),
        log.iter().map(|l| l.bytes_sent).sum::<u64>()
    );
    assert_eq!(
        u(&run, "results.errors.parse") + u(&run, "results.errors.read"),
        0
    );
    assert!(
        u(&run, "results.connections_opened") >= 100,
        "keepalive_requests 7 honoured"
    );
}

/// After a discarded body the next responses are received head first: a small response,
/// a large one, and a large one whose head alone is longer than what a head's receive
/// takes, in turn on the same connections, are all counted to the byte.
#[test]
fn bodies_changing_size_on_one_connection_are_counted_to_the_byte() {
    let pad = "p".repeat(3000);
    let ng = Nginx::start(
        "",
        &format!(
            "location = /mixed {{
                if ($connection_requests ~ [0-3]$) {{ rewrite ^ /91k.bin last; }}
                if ($connection_requests ~ [4-6]$) {{ rewrite ^ /1k.txt last; }}
                rewrite ^ /pad/91k.bin last;
            }}
            location /pad/ {{ rewrite ^/pad/(.*)$ /$1 break; add_header X-Pad {pad}; add_header X-Pad2 {pad}; }}"
        ),
    );
    let run = run_json(&[
        "-n",
        "900",
        "-d",
        "20s",
        "-c",
        "3",
        "-t",
        "1",
        &ng.url("/mixed"),
    ]);
    let log = ng.log();
    ran_on_io_uring(&run);
    assert_eq!(u(&run, "results.responses"), 900);
    assert_eq!(log.len(), 900);
    let big = log.iter().filter(|l| l.bytes_sent > 90_000).count();
    let padded = log.iter().filter(|l| l.bytes_sent > 99_000).count();
    assert!(
        big > 300 && padded > 100 && big < 900,
        "sizes mixed: {big} large, {padded} padded"
    );
    counted_to_the_byte(&run, &log, 3);
}

/// Large bodies are received head first per target: in a mix of a small and a large
/// target on the same connections, a small response does not turn the large target's
/// next responses back to a multishot receive that copies them whole (it did when the
/// choice was one flag for the run), and the multishot receive a small response leaves
/// armed is stopped before a large one. Every byte is counted against nginx's log.
#[test]
fn a_mix_of_small_and_large_targets_is_received_head_first_per_target() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.jsonl");
    std::fs::write(
        &file,
        "{\"url\": \"/1k.txt\", \"weight\": 1}\n{\"url\": \"/91k.bin\", \"weight\": 2}\n",
    )
    .unwrap();
    let file = file.display().to_string();
    let url = ng.url("/");
    let run = run_json(&[
        "-n",
        "1200",
        "-c",
        "4",
        "-t",
        "1",
        "--seed",
        "7",
        "--targets",
        &file,
        &url,
    ]);
    let log = ng.log();
    ran_on_io_uring(&run);
    assert_eq!(u(&run, "results.responses"), 1200);
    assert_eq!(log.len(), 1200);
    let big = log.iter().filter(|l| l.bytes_sent > 90_000).count();
    assert!(big > 600 && big < 1000, "sizes mixed: {big} large of 1200");
    counted_to_the_byte(&run, &log, 4);
}

/// Every byte nginx sent (`$bytes_sent`) was read, no error of any class, and each of
/// the `conns` connections opened once.
fn counted_to_the_byte(run: &serde_json::Value, log: &[common::LogLine], conns: u64) {
    assert_eq!(
        u(run, "results.bytes_read"),
        log.iter().map(|l| l.bytes_sent).sum::<u64>()
    );
    for e in ["connect", "read", "write", "timeout", "parse", "reset"] {
        assert_eq!(u(run, &format!("results.errors.{e}")), 0, "{e} errors");
    }
    assert_eq!(u(run, "results.connections_opened"), conns);
}

/// loadlens's own waits in the ring are not the server's iowait: entered with
/// `IORING_ENTER_NO_IOWAIT` where the kernel offers it (Linux ≥ 6.15), a low-rate run
/// against an idle nginx leaves every CPU's %iowait near 0 (it was ~99% on the
/// client's CPU before). Where the kernel lacks it (simulated), the CPUs that carry
/// loadlens's own waits are named in the Run and marked in the table.
#[test]
fn io_uring_waits_are_not_counted_as_iowait() {
    let ng = Nginx::start("", "");
    // 20 requests/s over 2 s: the two workers wait in the ring nearly all the time.
    let args = ["-d", "2s", "-R", "20", "-c", "2", "-t", "2"];
    let url = ng.url("/1k.txt");
    let mut with_url = args.to_vec();
    with_url.push(&url);
    let run = run_json(&with_url);
    assert_eq!(run["results"]["io"], "io_uring");
    assert!(
        run["results"]["iowait_cpus"].is_null(),
        "{}",
        run["results"]
    );
    let cpus = run["evidence"]["window"]["cpus"].as_array().unwrap();
    assert!(!cpus.is_empty());
    for c in cpus {
        let iowait = c["iowait"].as_f64().unwrap();
        assert!(iowait < 10.0, "cpu{} %iowait {iowait}: {c}", c["cpu"]);
    }
    // A kernel without IORING_FEAT_NO_IOWAIT: the waits are iowait, and said to be ours.
    let out = loadlens()
        .env("LOADLENS_IO_URING_IOWAIT", "1")
        .arg("run")
        .args(&with_url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("%iowait  %steal"), "{text}");
    let marked = text
        .lines()
        .filter(|l| l.trim_start().starts_with("cpu") && l.ends_with(" *"))
        .count();
    assert!(marked >= 1, "{text}");
    assert!(
        text.contains("* %iowait includes loadlens's own io_uring waits"),
        "{text}"
    );
}
