//! `loadlens run … --ray`: a Ray cluster of a head and two worker nodes on this machine
//! (`tests/ray_cluster.py`, Ray's own test cluster), segments on the worker nodes
//! against nginx on loopback. The merged count is nginx's access log, the merged
//! histogram the union of the segments'; a `--targets` mix (its file and the body file
//! it names shipped to the nodes) and a `--replay` (its log shipped) are sent as asked,
//! per endpoint as nginx logged them; a killed node is reported as its missing segment
//! in bounded time, and every node is torn down, also when the test fails.
//!
//! Needs Ray in the virtual environment `scripts/install-deps.sh test` makes (or the
//! Python in LOADLENS_PYTHON). Without it the test says so and passes, except in CI
//! (`CI=true`), where it fails.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::mix::{endpoints, logged};
use common::{latency_histogram, percentile_us, u, Nginx};
use serde_json::Value;

/// The Python with Ray, found the way loadlens finds it.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("LOADLENS_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/loadlens-venv/bin/python3")
}

fn ray_available(py: &Path) -> bool {
    Command::new(py)
        .args(["-c", "import ray"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The test's cluster: its processes all run under `dir`, so teardown finds them by
/// that path and touches nothing else.
struct Cluster {
    harness: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    dir: tempfile::TempDir,
    address: String,
}

impl Cluster {
    fn start(py: &Path) -> Cluster {
        // Short: Ray's unix socket paths live under it.
        let dir = tempfile::Builder::new()
            .prefix("llray")
            .tempdir_in("/tmp")
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.path().join("harness.log")).unwrap();
        let mut cmd = Command::new(py);
        cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ray_cluster.py"))
            .arg(dir.path())
            .arg(port.to_string())
            .arg("2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log);
        // If the test process dies, the harness stops its nodes (and Ray's reaper
        // takes what is left).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut harness = cmd.spawn().unwrap();
        let stdin = harness.stdin.take();
        let out = harness.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut c = Cluster {
            harness,
            stdin,
            lines,
            dir,
            address: String::new(),
        };
        let line = c.expect("address ", Duration::from_secs(150));
        c.address = line.trim_start_matches("address ").to_string();
        c
    }

    /// Waits for a line from the harness starting with `prefix`.
    fn expect(&self, prefix: &str, within: Duration) -> String {
        let t0 = Instant::now();
        while let Some(left) = within.checked_sub(t0.elapsed()) {
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!(
            "the Ray cluster did not say `{prefix}` within {within:?}:\n{}",
            std::fs::read_to_string(self.dir.path().join("harness.log")).unwrap_or_default()
        );
    }

    fn kill_node(&mut self, i: u32) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "kill {i}").unwrap();
        stdin.flush().unwrap();
        self.expect("killed", Duration::from_secs(60));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // End of input: the harness stops every node and exits.
        self.stdin.take();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = self.harness.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.harness.kill();
        let _ = self.harness.wait();
        // Anything of these nodes still running (found by the cluster's own directory
        // in its command line) is ended.
        let dir = self.dir.path().to_string_lossy().into_owned();
        for pid in processes_under(&dir) {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Processes whose command line names `dir`.
fn processes_under(dir: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(dir))
                .unwrap_or(false)
        })
        .collect()
}

fn loadlens_ray(py: &Path, address: &str, args: &[&str], json: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loadlens"));
    cmd.arg("run")
        .args(args)
        .args(["--no-watch", "-t", "1", "--ray", address])
        .arg("--json")
        .arg(json)
        .arg("-q")
        .env("LOADLENS_PYTHON", py);
    cmd
}

/// Waits for `child` at most `within`; kills it and fails past that.
fn wait_bounded(mut child: Child, within: Duration) -> std::process::Output {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if let Ok(Some(_)) = child.try_wait() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "loadlens --ray did not finish within {within:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The companion's own logic (which nodes get segments) by its doctests; needs only a
/// Python 3, not Ray.
#[test]
fn companion_places_segments_on_alive_nodes_with_cpus() {
    let out = Command::new("python3")
        .args(["-m", "doctest", "-v"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/ray/loadlens_ray.py"))
        .output()
        .expect("python3 must be installed (scripts/install-deps.sh test)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("13 passed and 0 failed"), "{text}");
}

/// A run's merged Run, read back after `loadlens run ARGS --ray` succeeded.
fn merged_run(py: &Path, address: &str, args: &[&str], dir: &Path) -> Value {
    let merged = dir.join("merged.json");
    let child = loadlens_ray(py, address, args, &merged)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child, Duration::from_secs(120));
    common::assert_ok(&out);
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    common::assert_valid("run", &m);
    assert_eq!(m["merged"]["missing"], serde_json::json!([]));
    m
}

/// Requests per endpoint of a merged Run, every one answered.
fn requests(m: &Value) -> BTreeMap<String, u64> {
    endpoints(m)
        .into_iter()
        .map(|(name, (requests, responses, errors))| {
            assert_eq!((responses, errors), (requests, 0), "{name}");
            (name, requests)
        })
        .collect()
}

/// A `--targets` mix (a POST's binary body in a file it names) through Ray with `-n`
/// and a seed: the nodes send it as asked. The merged counts per endpoint are nginx's
/// access log, and those of the first 2,001 places of the seed's order (the seed went
/// along, and the two segments took the places in turn); every POST nginx logged
/// carried the body; the merged Run names the targets file given.
fn a_mix_on_the_nodes(py: &Path, address: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ng = common::mix::nginx(dir.path(), "");
    let body: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(dir.path().join("post.bin"), &body).unwrap();
    let file = dir.path().join("mix.jsonl");
    std::fs::write(
        &file,
        concat!(
            "{\"url\": \"/a\", \"weight\": 5}\n",
            "{\"url\": \"/b?q=1\", \"weight\": 3, \"headers\": {\"X-Mix\": [\"1\", \"2\"]}}\n",
            "{\"url\": \"/c\", \"weight\": 2}\n",
            "{\"method\": \"POST\", \"url\": \"/p\", \"body_file\": \"post.bin\", \"name\": \"post\"}\n",
        ),
    )
    .unwrap();
    let (file, url) = (file.display().to_string(), ng.url("/"));
    let m = merged_run(
        py,
        address,
        &[
            "-n",
            "2001",
            "-c",
            "4",
            "--seed",
            "42",
            "--targets",
            &file,
            "--clients",
            "2",
            &url,
        ],
        dir.path(),
    );
    assert_eq!(u(&m, "results.responses"), 2001);
    assert_eq!(m["spec"]["mix"]["file"], file.as_str());
    assert_eq!(m["spec"]["mix"]["seed"], 42);
    let parts = m["merged"]["segments"].as_array().unwrap();
    assert_eq!(
        parts.iter().map(|p| u(p, "responses")).collect::<Vec<_>>(),
        [1001, 1000]
    );
    let path = |name: &str| match name {
        "post" => "/p".to_string(),
        n => n.trim_start_matches("GET ").to_string(),
    };
    let got: BTreeMap<String, u64> = requests(&m)
        .into_iter()
        .map(|(name, n)| (path(&name), n))
        .collect();
    assert_eq!(got, logged(&ng, dir.path()), "what nginx logged");
    let order = loadlens::spec::targets::schedule(&[5, 3, 2, 1], 42, false);
    let mut want = BTreeMap::new();
    for k in 0..2001 {
        let p = ["/a", "/b", "/c", "/p"][order[k % order.len()] as usize];
        *want.entry(p.to_string()).or_insert(0u64) += 1;
    }
    assert_eq!(got, want, "the first 2,001 places of seed 42's order");
    // Each POST with the shipped body's length (nginx's $request_length leaves out a
    // body `return` discards; its bytes are the file's, `cli::ray` tests).
    let lengths: Vec<String> = std::fs::read_to_string(dir.path().join("paths.log"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("POST "))
        .map(|l| l.split(' ').nth(5).unwrap().to_string())
        .collect();
    assert_eq!(lengths.len() as u64, want["/p"]);
    assert!(
        lengths.iter().all(|n| *n == body.len().to_string()),
        "a POST without its body: Content-Length {lengths:?}"
    );
}

/// A `--replay` through Ray: the log shipped to the nodes, its 60 requests dealt out
/// between them, each sent once; the merged counts per endpoint are the log's lines per
/// path and nginx's access log.
fn a_replay_on_the_nodes(py: &Path, address: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ng = common::mix::nginx(dir.path(), "");
    let path = |i: usize| ["/a", "/b", "/a", "/c"][i % 4];
    let text: String = (0..60)
        .map(|i| {
            format!(
                "{{\"t\": {:.2}, \"url\": \"{}?i={i}\"}}\n",
                i as f64 * 0.02,
                path(i)
            )
        })
        .collect();
    let log = dir.path().join("replay.jsonl");
    std::fs::write(&log, text).unwrap();
    let (log, url) = (log.display().to_string(), ng.url("/"));
    let m = merged_run(
        py,
        address,
        &[
            "--replay",
            &log,
            "--speed",
            "2",
            "-c",
            "4",
            "--clients",
            "2",
            &url,
        ],
        dir.path(),
    );
    assert_eq!(m["spec"]["mix"]["file"], log.as_str());
    assert_eq!(u(&m, "results.responses"), 60);
    let mut want = BTreeMap::new();
    for i in 0..60 {
        *want.entry(format!("GET {}", path(i))).or_insert(0u64) += 1;
    }
    assert_eq!(requests(&m), want);
    let saw: BTreeMap<String, u64> = logged(&ng, dir.path())
        .into_iter()
        .map(|(p, n)| (format!("GET {p}"), n))
        .collect();
    assert_eq!(saw, want, "what nginx logged");
    let mut places: Vec<usize> = std::fs::read_to_string(dir.path().join("paths.log"))
        .unwrap()
        .lines()
        .map(|l| l.split(' ').nth(4).unwrap().parse().unwrap())
        .collect();
    places.sort();
    assert_eq!(places, (0..60).collect::<Vec<_>>(), "each request once");
}

/// One cluster for every check (starting one takes a while on a small machine); the
/// node is killed last.
#[test]
fn segments_on_two_ray_nodes_merge_exactly_send_mixes_and_a_killed_node_is_missing() {
    let py = python();
    if !ray_available(&py) {
        let why = format!(
            "Ray is not installed for {} (scripts/install-deps.sh test installs it)",
            py.display()
        );
        common::skip_or_fail(&why);
        return;
    }
    let ng = Nginx::start("", "");
    let cluster = Cluster::start(&py);
    let mut cluster = cluster;
    let dir = tempfile::tempdir().unwrap();
    let url = ng.url("/1k.txt");

    // More clients than nodes that can send load: refused, one line, exit 2.
    let out = loadlens_ray(
        &py,
        &cluster.address,
        &["-n", "10", "-c", "4", "--clients", "3", &url],
        &dir.path().join("x.json"),
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--clients 3 but the Ray cluster has 2"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // Two segments of a -n budget: exactly the access log.
    let m = merged_run(
        &py,
        &cluster.address,
        &[
            "-n",
            "2000",
            "-c",
            "4",
            "--clients",
            "2",
            "--server-node-resource",
            "server",
            &url,
        ],
        dir.path(),
    );
    let log = ng.log();
    assert_eq!(u(&m, "results.responses"), 2000);
    assert_eq!(
        log.len(),
        2000,
        "nginx logged every request of both segments"
    );
    let parts = m["merged"]["segments"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(
        parts.iter().map(|p| u(p, "responses")).collect::<Vec<_>>(),
        [1000, 1000]
    );
    // The merged histogram is the union of the two segments' (added here).
    let mut union = latency_histogram(&parts[0]["latency"]);
    union.add(latency_histogram(&parts[1]["latency"])).unwrap();
    assert_eq!(percentile_us(&m, 50.0), union.value_at_quantile(0.5));
    assert_eq!(percentile_us(&m, 99.0), union.value_at_quantile(0.99));
    assert_eq!(u(&m, "results.latency.max_us"), union.max());
    assert_eq!(u(&m, "results.latency.count"), union.len());
    // The machine was watched on the server's node (the head, with the `server`
    // resource): nginx found there, the segments themselves unwatched.
    let procs = m["evidence"]["topology"]["processes"].as_array().unwrap();
    assert!(
        procs.iter().any(|p| p["comm"] == "nginx"),
        "{}",
        m["evidence"]["topology"]
    );
    assert!(
        m["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("server's node")),
        "{}",
        m["warnings"]
    );

    a_mix_on_the_nodes(&py, &cluster.address);
    a_replay_on_the_nodes(&py, &cluster.address);

    // A node killed during its segment: reported missing, not waited for.
    let lines_before = ng.log().len();
    let merged = dir.path().join("killed.json");
    let child = loadlens_ray(
        &py,
        &cluster.address,
        &["-d", "15s", "-c", "4", "--clients", "2", &url],
        &merged,
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Once the segments are sending (nginx logs their requests), one node dies.
    let t0 = Instant::now();
    while std::fs::read_to_string(ng.root().join("access.log"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
        < lines_before + 100
    {
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "the segments never started"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.kill_node(1);
    let out = wait_bounded(child, Duration::from_secs(90));
    common::assert_ok(&out);
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert_eq!(m["merged"]["segments"].as_array().unwrap().len(), 1);
    let missing = m["merged"]["missing"].as_array().unwrap();
    assert_eq!(missing.len(), 1, "{m:?}");
    let reason = m["merged"]["missing_reasons"][0].as_str().unwrap();
    assert!(reason.contains("died"), "{reason}");
    assert!(u(&m, "results.responses") > 0);
    drop(cluster);
}
