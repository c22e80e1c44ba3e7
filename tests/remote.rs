//! The server on another machine, watched over ssh (`run --watch ssh://…`), against a
//! REAL OpenSSH server the test starts itself inside the server's network namespace:
//! its own host key, `sshd_config`, authorized key and client key, all in a temp dir;
//! never the machine's own sshd, /etc/ssh, ~/.ssh or keys. The client runs in the other
//! namespace, so the server is at an address that is not the client's (10.77.0.2).
//! And `loadlens watch --stdio` alone: its refusals, its end when stdin closes.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{loadlens, output_within, skip_or_fail, wait_exit, wait_for, NetnsPair, Nginx, HANG};
use serde_json::Value;

use common::sshd::{Sshd, SSHD};

fn have_sshd() -> bool {
    if Path::new(SSHD).exists() && which("ssh") {
        return true;
    }
    skip_or_fail("openssh-server/openssh-client not installed (scripts/install-deps.sh test)");
    false
}

fn which(cmd: &str) -> bool {
    loadlens::lab::world::which(cmd).is_some()
}

/// The processes in a network namespace: (pid, comm, command line).
fn netns_procs(ns: &str) -> Vec<(i32, String, String)> {
    let out = Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .filter_map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            Some((pid, comm.trim().to_string(), cmd))
        })
        .collect()
}

/// `loadlens watch` processes in the server namespace (whatever their path).
fn watches_in(ns: &NetnsPair) -> Vec<(i32, String, String)> {
    netns_procs(&ns.server)
        .into_iter()
        .filter(|(_, _, cmd)| cmd.contains("loadlens") && cmd.contains(" watch --stdio"))
        .collect()
}

/// Whether a process has a watch's sampler thread (named `loadlens-watch`).
fn sampling(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks.flatten().any(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "loadlens-watch")
            })
        })
        .unwrap_or(false)
}

/// Bytes the server's sshd sent that the client acknowledged (`ss -ti`'s
/// `bytes_acked`, summed over its established connections).
fn acked_by_client(ns: &NetnsPair) -> u64 {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.server,
            "ss",
            "-tinH",
            "state",
            "established",
        ])
        .args(["sport", "=", ":22"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("bytes_acked:"))
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}

/// `loadlens run URL ARGS` in the client namespace; its output (bounded by HANG).
fn run_in(ns: &NetnsPair, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        &ns.client,
        env!("CARGO_BIN_EXE_loadlens"),
        "run",
    ])
    .args(args);
    output_within(cmd, HANG * 3)
}

/// `tag` keeps the namespaces of tests running side by side apart.
fn world(tag: &str) -> Option<(NetnsPair, Nginx, Sshd)> {
    if !have_sshd() {
        return None;
    }
    let ns = NetnsPair::new(tag);
    let ng = Nginx::start_opts(Some(&ns.server), ns.server_ip, "", "", "", "");
    let sshd = Sshd::start(&ns);
    Some((ns, ng, sshd))
}

#[test]
fn the_server_on_another_machine_is_watched_over_ssh_and_the_build_sent_once() {
    let Some((ns, ng, sshd)) = world("ssh-ok") else {
        return;
    };
    let url = format!("http://{}:{}/1k.txt", ns.server_ip, ng.port);
    let dest = format!("ssh://root@{}:22", ns.server_ip);
    let ssh = sshd.ssh_command("client_key", "accept-new");
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("run.json");
    let args = [
        url.as_str(),
        "-c",
        "8",
        "-d",
        "2s",
        "--watch",
        &dest,
        "--ssh-command",
        &ssh,
        "--json",
        json.to_str().unwrap(),
    ];
    let out = run_in(&ns, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nsshd: {}", sshd.log());
    assert!(stderr.contains("note: copied this loadlens"), "{stderr}");
    let cached = sshd.cached();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let inode = std::fs::metadata(&cached[0]).unwrap().ino();
    assert_eq!(sshd.remote_watches(), "", "a remote watch outlived the run");
    assert_eq!(watches_in(&ns), vec![], "a remote watch outlived the run");
    assert_eq!(
        sshd.tmp_left(),
        Vec::<PathBuf>::new(),
        "left in the server's TMPDIR"
    );

    let run: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    common::assert_valid("run", &run);
    let ev = &run["evidence"];
    assert_eq!(ev["source"]["transport"], "ssh");
    assert_eq!(ev["source"]["destination"], dest.as_str());
    let unc = ev["source"]["clock_uncertainty_s"].as_f64().unwrap();
    assert!((0.0..1.0).contains(&unc), "{unc}");
    // The server's nginx, found and watched on its machine: its worker's CPU in the
    // window, which the client's namespace could not have seen.
    let worker = ev["topology"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["role"] == "worker")
        .unwrap_or_else(|| panic!("no nginx worker watched: {}", ev["topology"]));
    let pid = worker["pid"].as_i64().unwrap();
    let busy = ev["window"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_i64() == Some(pid))
        .map(|p| p["cpu_pct"].as_f64().unwrap())
        .unwrap();
    assert!(busy > 0.0, "worker {pid} used no CPU: {}", ev["window"]);
    // The terminal view of that Run: the server's worker in "During the run", and
    // where the evidence came from.
    let text = output_within(
        {
            let mut c = loadlens();
            c.arg("report").arg(&json);
            c
        },
        HANG,
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("During the run"), "{text}");
    assert!(text.contains("watched over ssh"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("nginx worker") && l.contains(&pid.to_string())),
        "{text}"
    );
    assert!(text.contains("Findings"), "{text}");

    // Again: the build is reused, not sent again.
    let out = run_in(&ns, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("copied"), "{stderr}");
    assert_eq!(sshd.cached(), cached);
    assert_eq!(std::fs::metadata(&cached[0]).unwrap().ino(), inode);
    assert_eq!(sshd.remote_watches(), "");
    assert_eq!(watches_in(&ns), vec![]);
    assert_eq!(sshd.tmp_left(), Vec::<PathBuf>::new());
    drop(ng);
    let dir = sshd.dir.path().to_path_buf();
    drop(sshd);
    drop(ns);
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn ssh_failures_are_one_line_and_exit_2_before_any_load() {
    let Some((ns, ng, sshd)) = world("ssh-bad") else {
        return;
    };
    let url = format!("http://{}:{}/1k.txt", ns.server_ip, ng.port);
    let cases = [
        // A key the server does not accept: BatchMode, so no password prompt.
        (
            format!("ssh://root@{}", ns.server_ip),
            sshd.ssh_command("wrong_key", "accept-new"),
            "authentication to 10.77.0.2 failed",
        ),
        // A host key never seen, and no permission to add it.
        (
            format!("ssh://root@{}", ns.server_ip),
            sshd.ssh_command("client_key", "yes"),
            "host key of 10.77.0.2 is unknown",
        ),
        // Nothing listening there.
        (
            format!("ssh://root@{}:2", ns.server_ip),
            sshd.ssh_command("client_key", "accept-new"),
            "cannot connect to 10.77.0.2",
        ),
    ];
    for (dest, ssh, says) in cases {
        let out = run_in(
            &ns,
            &[&url, "-d", "2s", "--watch", &dest, "--ssh-command", &ssh],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{dest} {ssh}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(stderr.contains(says), "{says}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
    // None of them sent a request (the probe's connection is not one).
    assert!(
        ng.log().is_empty(),
        "requests were sent: {:?}",
        ng.log().len()
    );
    assert!(sshd.cached().is_empty());
}

#[test]
fn ctrl_c_ends_the_load_keeps_the_remote_evidence_and_leaves_nothing_there() {
    let Some((ns, ng, sshd)) = world("ssh-int") else {
        return;
    };
    let url = format!("http://{}:{}/1k.txt", ns.server_ip, ng.port);
    let dest = format!("ssh://root@{}", ns.server_ip);
    let ssh = sshd.ssh_command("client_key", "accept-new");
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("run.json");
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.client,
            env!("CARGO_BIN_EXE_loadlens"),
            "run",
        ])
        .args([
            &url,
            "-c",
            "4",
            "-d",
            "10m",
            "--watch",
            &dest,
            "--ssh-command",
            &ssh,
        ])
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The load is running once the server has served a request.
    wait_for("the load to start", || !ng.log().is_empty());
    assert_ne!(sshd.remote_watches(), "", "no remote watch while loading");
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_exit(&mut child, HANG);
    assert_eq!(status.code(), Some(130));
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(run["interrupted"], "SIGINT");
    assert_eq!(run["evidence"]["source"]["transport"], "ssh");
    assert_eq!(sshd.remote_watches(), "", "a remote watch outlived the run");
}

#[test]
fn a_channel_lost_mid_run_keeps_the_load_and_the_samples_before_it() {
    let Some((ns, ng, sshd)) = world("ssh-drop") else {
        return;
    };
    let url = format!("http://{}:{}/1k.txt", ns.server_ip, ng.port);
    let dest = format!("ssh://root@{}", ns.server_ip);
    let ssh = sshd.ssh_command("client_key", "accept-new");
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("run.json");
    let load_s = 10.0;
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.client,
            env!("CARGO_BIN_EXE_loadlens"),
            "run",
        ])
        .args([
            &url,
            "-c",
            "4",
            "-d",
            "10s",
            "--sample",
            "200ms",
            // The second load runs after the loss, unwatched: the command goes on.
            "--repeat",
            "2",
            "--pause",
            "1s",
            "--watch",
            &dest,
            "--ssh-command",
            &ssh,
        ])
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The remote watch is watching once its sampler thread runs; from then on all the
    // server's sshd sends the client is `started` (once) and the samples, 200 ms apart:
    // three separate growths of the bytes the client's TCP acknowledged are two
    // samples at least that reached the client's machine.
    wait_for("the remote watch's sampler", || {
        watches_in(&ns).iter().any(|w| sampling(w.0))
    });
    let (mut grew, mut last) = (0, acked_by_client(&ns));
    wait_for("two samples from the remote watch", || {
        let now = acked_by_client(&ns);
        if now > last {
            grew += 1;
            last = now;
        }
        grew >= 3
    });
    // The server's sshd goes, with its sessions: the channel is cut. Not the watch.
    let killed: Vec<i32> = netns_procs(&ns.server)
        .into_iter()
        .filter(|(_, comm, _)| comm.starts_with("sshd"))
        .map(|(pid, _, _)| pid)
        .collect();
    assert!(killed.len() >= 2, "the listener and a session: {killed:?}");
    for p in &killed {
        // SAFETY: signals to this test's own sshd processes, found in its namespace.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    let status = wait_exit(&mut child, HANG);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");

    let run: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    common::assert_valid("run", &run);
    // Both loads ran their course; the second one without the server's evidence.
    let reps = run["repetitions"].as_array().unwrap();
    assert_eq!(reps.len(), 2);
    for r in reps {
        let dur = r["results"]["duration_s"].as_f64().unwrap();
        assert!(dur >= load_s - 0.5, "{dur}");
        assert!(r["results"]["responses"].as_u64().unwrap() > 0);
    }
    assert!(reps[1]["evidence"].is_null(), "{}", reps[1]["evidence"]);
    let ev = &reps[0]["evidence"];
    let lost = ev["source"]["lost_at_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("no lost_at_s: {}", ev["source"]));
    assert!(0.0 < lost && lost < load_s, "{lost}");
    let samples = ev["samples"].as_array().unwrap();
    assert!(
        samples.len() >= 2,
        "{} samples, lost at {lost}: {} {}",
        samples.len(),
        ev["warnings"],
        ev["source"]
    );
    for s in samples {
        let t = s["t_s"].as_f64().unwrap();
        assert!(
            t <= lost + 0.5,
            "a sample at {t} s after the loss at {lost} s"
        );
    }
    // What was watched is known, and the window rebuilt from the samples saw the
    // nginx worker busy.
    assert!(ev["topology"]["processes"].as_array().unwrap().len() >= 2);
    let busy = ev["window"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["cpu_pct"].as_f64().unwrap() > 0.0);
    assert!(busy, "{}", ev["window"]);
    let warned = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("lost"))
    };
    assert!(warned(&run["warnings"]), "{}", run["warnings"]);
    assert!(warned(&ev["warnings"]), "{}", ev["warnings"]);
    // The remote watch noticed its closed standard input and exited.
    wait_for("the remote watch to exit", || watches_in(&ns).is_empty());
    assert_eq!(sshd.remote_watches(), "");
    assert_eq!(sshd.tmp_left(), Vec::<PathBuf>::new());
}

#[test]
fn a_watch_run_alone_is_attached_to_a_run_without_one() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let (run_json, watch_json, joined) = (
        dir.path().join("run.json"),
        dir.path().join("watch.json"),
        dir.path().join("joined.json"),
    );
    let url = ng.url("/1k.txt");
    // The watch alone on the server, for longer than the load on both sides.
    let mut watch = loadlens()
        .args([
            "watch",
            &url,
            "--duration",
            "6s",
            "--sample",
            "250ms",
            "--json",
        ])
        .arg(&watch_json)
        .spawn()
        .unwrap();
    let pid = watch.id() as i32;
    wait_for("the watch to start", || sampling(pid));
    let out = output_within(
        {
            let mut c = loadlens();
            c.args([
                "run",
                &url,
                "-c",
                "8",
                "-d",
                "2s",
                "--no-watch",
                "-q",
                "--json",
            ])
            .arg(&run_json);
            c
        },
        HANG,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(wait_exit(&mut watch, HANG).success());
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    assert!(
        run["evidence"].is_null(),
        "the run watched: {}",
        run["evidence"]
    );

    let out = output_within(
        {
            let mut c = loadlens();
            c.arg("attach")
                .arg(&run_json)
                .arg(&watch_json)
                .arg("--json")
                .arg(&joined);
            c
        },
        HANG,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("During the run"), "{text}");
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&joined).unwrap()).unwrap();
    common::assert_valid("run", &j);
    let ev = &j["evidence"];
    assert_eq!(ev["source"]["transport"], "attach");
    assert!(ev["started_unix_s"].is_null());
    // The samples within the 2 s load only, on its time line.
    let samples = ev["samples"].as_array().unwrap();
    assert!(samples.len() >= 4, "{}", samples.len());
    for s in samples {
        let t = s["t_s"].as_f64().unwrap();
        assert!((0.0..=2.5).contains(&t), "a sample at {t} s");
    }
    // The worker was busy serving it, and the findings say something about it.
    let busy = ev["window"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "worker")
        .any(|p| p["cpu_pct"].as_f64().unwrap() > 5.0);
    assert!(busy, "{}", ev["window"]["processes"]);
    assert!(
        !j["findings"].as_array().unwrap().is_empty(),
        "{}",
        j["findings"]
    );
    // A watch that does not overlap the load is refused, saying so.
    let mut later: Value =
        serde_json::from_str(&std::fs::read_to_string(&watch_json).unwrap()).unwrap();
    later["started_unix_s"] = (later["started_unix_s"].as_f64().unwrap() + 3600.0).into();
    std::fs::write(&watch_json, later.to_string()).unwrap();
    let out = output_within(
        {
            let mut c = loadlens();
            c.arg("attach").arg(&run_json).arg(&watch_json);
            c
        },
        HANG,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("do not overlap"), "{stderr}");
}

/// `loadlens watch --stdio` with the test as its client.
struct StdioWatch {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl StdioWatch {
    fn start() -> StdioWatch {
        let mut child = loadlens()
            .args(["watch", "--stdio", "--max-duration", "10m"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        StdioWatch { child, out }
    }

    fn say(&mut self, line: &str) -> Value {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut reply = String::new();
        self.out.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
    }
}

fn hello(version: &str) -> String {
    format!(r#"{{"type":"hello","protocol":3,"version":"{version}"}}"#)
}

#[test]
fn the_remote_watch_exits_when_its_stdin_closes() {
    let mut w = StdioWatch::start();
    let me = env!("CARGO_PKG_VERSION");
    let h = w.say(&hello(me));
    assert_eq!(h["type"], "hello");
    assert_eq!(h["version"], me);
    let c = w.say(r#"{"type":"clock","t0":12.5}"#);
    assert_eq!(
        (c["type"].as_str(), c["t0"].as_f64()),
        (Some("clock"), Some(12.5))
    );
    assert!(c["t2"].as_f64().unwrap() >= c["t1"].as_f64().unwrap());
    let s = w.say(r#"{"type":"start","target":"127.0.0.1:1","sample_s":1.0,"profile_hz":null}"#);
    assert_eq!(s["type"], "started", "{s}");
    // The channel closes mid-watch (ssh gone): the watch ends, the process exits.
    drop(w.child.stdin.take());
    let status = wait_exit(&mut w.child, HANG);
    assert!(status.success(), "{status}");
}

#[test]
fn a_version_mismatch_is_refused_naming_both() {
    let mut w = StdioWatch::start();
    let r = w.say(&hello("0.0.1-other"));
    assert_eq!(r["type"], "refused");
    let reason = r["reason"].as_str().unwrap();
    assert!(reason.contains("0.0.1-other"), "{reason}");
    assert!(reason.contains(env!("CARGO_PKG_VERSION")), "{reason}");
    assert_eq!(wait_exit(&mut w.child, HANG).code(), Some(2));
}

/// tune over ssh asks `watch --stdio` to write config files: it writes only a file it
/// holds, holds only a config file of the server named, and reads a file only within
/// `MAX_CONFIG` (512 KiB). Each refusal is an error reply; the files are untouched.
#[test]
fn tune_requests_write_only_a_held_config_file() {
    let mut w = StdioWatch::start();
    let me = env!("CARGO_PKG_VERSION");
    assert_eq!(w.say(&hello(me))["type"], "hello");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("other.conf");
    std::fs::write(&f, "keep me\n").unwrap();
    let path = f.display().to_string();
    let r = w.say(&format!(
        r#"{{"type":"tune","op":{{"do":"write","path":"{path}","text":"overwritten"}}}}"#
    ));
    assert_eq!(r["type"], "error", "{r}");
    assert!(
        r["message"].as_str().unwrap().contains("is not held"),
        "{r}"
    );
    // This test's own process is no nginx whose config that file is.
    let pid = std::process::id();
    let r = w.say(&format!(
        r#"{{"type":"tune","op":{{"do":"hold","kind":"nginx","pid":{pid},"path":"{path}"}}}}"#
    ));
    assert_eq!(r["type"], "error", "{r}");
    let r = w.say(&format!(
        r#"{{"type":"tune","op":{{"do":"write","path":"{path}","text":"overwritten"}}}}"#
    ));
    assert_eq!(r["type"], "error", "{r}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep me\n");
    // A read is the file's text; one past the limit is refused, naming it.
    let r = w.say(&format!(
        r#"{{"type":"tune","op":{{"do":"read","path":"{path}"}}}}"#
    ));
    assert_eq!(r["type"], "tuned", "{r}");
    assert_eq!(r["text"], "keep me\n");
    let big = dir.path().join("big.conf");
    std::fs::write(&big, vec![b'#'; 600 << 10]).unwrap();
    let r = w.say(&format!(
        r#"{{"type":"tune","op":{{"do":"read","path":"{}"}}}}"#,
        big.display()
    ));
    assert_eq!(r["type"], "error", "{r}");
    assert!(r["message"].as_str().unwrap().contains("512 KiB"), "{r}");
    let r = w.say(r#"{"type":"tune","op":{"do":"release"}}"#);
    assert_eq!(r["type"], "tuned", "{r}");
}
