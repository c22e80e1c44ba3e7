//! `loadlens tune` against real servers, each in its own lab world (`loadlens lab tune`,
//! network namespaces it creates and removes): the scenario's own fix found, applied
//! and kept with a significant gain; a decoy reverted with the file byte-identical; a
//! change failing the config test put back; SIGTERM in the middle of a pair; a dry run
//! that writes nothing. The faults are decisive (tenfold), so the decisions do not
//! depend on the machine's speed; the assertions are on what tune did and what the lab
//! found afterwards (the files' bytes and mtimes, a request served).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{loadlens, output_within, skip_or_fail};
use serde_json::Value;

/// A tune session is loads of a few seconds each: far below this unless it hangs.
const BOUND: Duration = Duration::from_secs(300);

fn ready() -> bool {
    if unsafe { libc::geteuid() } != 0 {
        skip_or_fail("lab tune needs root (network namespaces)");
        return false;
    }
    true
}

/// `loadlens lab tune NAME ARGS --json FILE`: exit code, stdout, stderr, the Run. Loads
/// of 1 s unless ARGS say `-d`: the faults are tenfold, so a second decides as well as
/// more did (at 1 s, each kept fix's interval began at +410% or more on a busy host,
/// and the decoy is still reverted), and a session of 11 loads takes ~15 s less
/// (php-fpm-children: 41 s at 2 s, 26 s at 1 s).
fn lab_tune(name: &str, args: &[&str]) -> (i32, String, String, Option<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tune.json");
    let mut cmd = loadlens();
    cmd.args(["lab", "tune", name]);
    if !args.contains(&"-d") {
        cmd.args(["-d", "1s"]);
    }
    cmd.arg("--json").arg(&json).args(args);
    let out = output_within(cmd, BOUND);
    let run = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        run,
    )
}

fn step(run: &Value) -> &Value {
    &run["tune"]["steps"][0]
}

/// The scenario's fix is found, applied and kept: a significant gain, its interval
/// printed, the file changed, the server serving. `args` go on to `lab tune`. The Run.
fn kept(name: &str, directive: &str, args: &[&str]) -> Option<Value> {
    if !ready() {
        return None;
    }
    let (code, out, err, run) = lab_tune(name, args);
    let run = run.unwrap_or_else(|| panic!("no JSON; stdout:\n{out}\nstderr:\n{err}"));
    let s = step(&run);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(s["decision"], "kept", "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        s["edits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["directive"] == directive),
        "{name}: changed {:?}, not {directive}",
        s["edits"]
    );
    let low = s["gain"]["low_pct"].as_f64().unwrap();
    assert!(
        low > 2.0,
        "{name}: the interval's low end {low}% is not a gain"
    );
    assert_eq!(s["pairs"].as_array().unwrap().len(), 5);
    assert!(out.contains("95% interval"), "{out}");
    assert!(out.contains(" changed\n"), "no config file changed:\n{out}");
    assert!(
        out.contains("lab: the server serves") && out.contains("(status 200)"),
        "{out}"
    );
    Some(run)
}

/// Each load of `side` (`old`, `new`) in the pairs: the workers of the server reloaded
/// before it, as they had settled when it began.
fn settled_workers(run: &Value, side: &str) -> Vec<u64> {
    step(run)["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = p[side]["settled"]
                .as_array()
                .expect("a settle before each load");
            assert_eq!(s.len(), 1, "one server reloaded: {s:?}");
            s[0]["workers"].as_u64().unwrap()
        })
        .collect()
}

/// Also the regression test of tune beside other test binaries: the first load after
/// php-fpm was reloaded to 50 children met the pool still forking (its first child had
/// served the check) and served 0/s, and the fix was reverted. Each load now begins
/// after the pool settled: every new side with all 50 children (`pm.start_servers`),
/// every old side with its 2.
#[test]
fn php_fpm_children_fix_is_kept() {
    let Some(run) = kept("php-fpm-children", "pm.max_children", &[]) else {
        return;
    };
    assert_eq!(
        settled_workers(&run, "new"),
        [50; 5],
        "{}",
        step(&run)["pairs"]
    );
    assert_eq!(
        settled_workers(&run, "old"),
        [2; 5],
        "{}",
        step(&run)["pairs"]
    );
}

#[test]
fn php_fpm_socket_fix_is_kept() {
    kept("php-fpm-socket", "pm.max_children", &[]);
}

#[test]
fn worker_connections_fix_is_kept() {
    kept("worker-connections", "worker_connections", &[]);
}

#[test]
fn gzip_level_fix_is_kept() {
    kept("gzip-cpu", "gzip_comp_level", &[]);
}

#[test]
fn upstream_keepalive_fix_is_kept() {
    kept("time-wait", "keepalive", &[]);
}

#[test]
fn fd_limit_fix_is_kept() {
    // Judged by failed requests (errors<1%), whose share in a short load is the
    // noisiest objective: at 1 s the new side's spread came to 137% once on a busy host,
    // near tune's bar for it (2 × the old side's 72% + 5), so this one keeps its 2 s.
    kept("fd-limit", "worker_rlimit_nofile", &["-d", "2s"]);
}

/// A JVM upstream whose 4 threads queue 40 connections: without a probe, one load's
/// evidence reads as the load's own concurrency (`concurrency-bound`, "nothing to
/// tune"). The baseline probes as `run` does and names the pool, whose size is in the
/// application's code: tune says so (no typed change) and touches nothing. On a host
/// whose CPUs other work holds (the client starved, the workers waiting for a CPU) a
/// queue may be the CPUs': the diagnosis rightly declines to name a pool there, and the
/// session runs again (at most 4 times; every one said).
#[test]
fn the_baseline_probes_a_pools_queue() {
    if !ready() {
        return;
    }
    let contended = ["client-saturated", "run-queue-delay"];
    for attempt in 1..=4 {
        let (code, out, err, run) = lab_tune("thread-pool", &["-d", "2s"]);
        let run = run.unwrap_or_else(|| panic!("no JSON; stdout:\n{out}\nstderr:\n{err}"));
        assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
        // Whatever the diagnosis, a session without a typed change touches nothing.
        assert_eq!(run["tune"]["steps"].as_array().map(Vec::len), Some(0));
        assert!(out.contains("unchanged (content and mtime)"), "{out}");
        let ids: Vec<&str> = run["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["id"].as_str())
            .collect();
        if ids.first() == Some(&"pool-limit") {
            assert!(
                run["probes"].as_array().is_some_and(|p| !p.is_empty()),
                "pool-limit without a probe:\n{out}"
            );
            assert!(err.contains("no typed change for pool-limit"), "{err}");
            return;
        }
        let busy: Vec<&&str> = contended.iter().filter(|c| ids.contains(c)).collect();
        assert!(
            !busy.is_empty() && attempt < 4,
            "attempt {attempt}: {ids:?}, the host not contended (or 4 busy attempts):\n{out}\n{err}"
        );
        eprintln!("attempt {attempt}: the host's CPUs were contended ({busy:?}): again");
    }
}

/// A change where the limit is not: php-fpm's children set the rate, nginx's read
/// timeout does nothing to it. Reverted; every file byte-identical to the original.
#[test]
fn a_decoy_is_reverted_byte_identical() {
    if !ready() {
        return;
    }
    let (code, out, err, run) =
        lab_tune("php-fpm-children", &["--try", "fastcgi_read_timeout 61s"]);
    let run = run.unwrap_or_else(|| panic!("no JSON; stdout:\n{out}\nstderr:\n{err}"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(step(&run)["decision"], "reverted", "{out}");
    assert!(
        out.contains("nginx.conf byte-identical to the original"),
        "{out}"
    );
    assert!(!out.contains(" changed\n"), "{out}");
    assert!(
        out.contains("lab: the server serves") && out.contains("(status 200)"),
        "{out}"
    );
}

/// `--try CHANGE` on php-fpm-children fails at `stage` (said on stderr): the file is put
/// back byte-identical, the server serves, tune exits 2.
fn put_back(change: &str, stage: &str) {
    if !ready() {
        return;
    }
    let (code, out, err, _) = lab_tune("php-fpm-children", &["--try", change]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains(stage), "{stage} named: {err}");
    assert!(
        out.contains("nginx.conf byte-identical to the original"),
        "{out}"
    );
    assert!(
        out.contains("lab: the server serves") && out.contains("(status 200)"),
        "{out}"
    );
}

/// A value nginx refuses: its own config test fails, the file is put back, the server
/// keeps serving, tune exits non-zero.
#[test]
fn a_change_failing_the_config_test_is_put_back() {
    put_back("worker_connections banana", "the config test failed");
}

/// A value nginx's config test accepts but its new workers cannot run with: `nginx -t`
/// only warns that 10^9 worker_connections exceed the open-files limit, and each new
/// worker then fails to allocate its connections (hundreds of GB) and exits with a
/// fatal code, which the master does not respawn. tune sees no new workers serve, puts
/// the file back, reloads it and exits 2; the server serves as before.
#[test]
fn a_change_whose_reload_fails_is_put_back() {
    put_back("worker_connections 1000000000", "started no new workers");
}

/// SIGTERM while the second pair runs on the new config: the file is written back
/// byte for byte, the server reloaded and serving, exit 143.
#[test]
fn sigterm_in_a_pair_restores_the_file() {
    if !ready() {
        return;
    }
    let mut child = loadlens()
        .args(["lab", "tune", "php-fpm-children", "-d", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let stderr = child.stderr.take().unwrap();
    let watcher = std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("pair 2 of 5: new config") {
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        seen
    });
    let status = common::wait_exit(&mut child, BOUND);
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    let err = watcher.join().unwrap();
    assert!(err.contains("pair 2 of 5: new config"), "{err}");
    assert_eq!(status.code(), Some(143), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("restored the original config"), "{err}");
    assert!(
        out.contains("php-fpm.conf byte-identical to the original"),
        "{out}"
    );
    assert!(
        out.contains("lab: the server serves") && out.contains("(status 200)"),
        "{out}"
    );
}

/// Without --apply: the change is shown as a diff and nothing is written (every file's
/// content and mtime unchanged); exit 0.
#[test]
fn a_dry_run_writes_nothing() {
    if !ready() {
        return;
    }
    let (code, out, err, run) = lab_tune("php-fpm-children", &["--dry-run"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(step(&run.unwrap())["decision"], "dry_run");
    assert!(out.contains("+pm.max_children = 50"), "{out}");
    assert!(
        out.contains("php-fpm.conf unchanged (content and mtime)"),
        "{out}"
    );
    assert!(
        !out.contains("byte-identical") && !out.contains(" changed\n"),
        "{out}"
    );
}

/// `loadlens report RUN --html PAGE` of a tune session's Run: the page's text.
fn html_of(run: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tune.json");
    let page = dir.path().join("tune.html");
    std::fs::write(&json, serde_json::to_vec(run).unwrap()).unwrap();
    let mut cmd = loadlens();
    cmd.arg("report").arg(&json).arg("--html").arg(&page);
    let out = output_within(cmd, Duration::from_secs(60));
    assert!(out.status.success(), "{out:?}");
    std::fs::read_to_string(&page).unwrap()
}

fn ssh_ready() -> bool {
    if !ready() {
        return false;
    }
    if !std::path::Path::new("/usr/sbin/sshd").exists() {
        skip_or_fail("tune over ssh needs openssh-server (the lab starts an sshd of its own)");
        return false;
    }
    true
}

/// `tune --watch ssh://`: the world's own sshd (keys of its own) in the server
/// namespace, the config read, held (backup and lock there), written, tested with
/// `nginx -t` and reloaded through the watch's session. The fix is kept with its
/// interval; the baseline was watched over ssh; the backup of the original is said;
/// the HTML page tells the step as kept with its pairs and interval.
#[test]
fn tune_over_ssh_keeps_the_fix() {
    if !ssh_ready() {
        return;
    }
    let (code, out, err, run) = lab_tune("worker-connections", &["--watch-ssh", "-d", "1s"]);
    let run = run.unwrap_or_else(|| panic!("no JSON; stdout:\n{out}\nstderr:\n{err}"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(run["evidence"]["source"]["transport"], "ssh", "{out}");
    let s = step(&run);
    assert_eq!(s["decision"], "kept", "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(s["edits"][0]["directive"], "worker_connections");
    assert!(s["gain"]["low_pct"].as_f64().unwrap() > 2.0, "{s}");
    assert!(out.contains("95% interval"), "{out}");
    assert!(out.contains("nginx.conf changed\n"), "{out}");
    assert!(
        out.contains("lab: the server serves") && out.contains("(status 200)"),
        "{out}"
    );
    // The original kept on the server's side, beside its lock.
    assert!(
        err.contains("was changed: its original is kept in") && err.contains("nginx.conf.orig"),
        "{err}"
    );
    let page = html_of(&run);
    for want in [
        "id=\"tune\"",
        "<h3>Before</h3>",
        "data-decision=\"kept\"",
        "Step 1: KEPT",
        "worker_connections",
        "95% interval",
        "<table class=\"pairs\">",
        "<h3>After</h3>",
        "Kept, and live now",
    ] {
        assert!(page.contains(want), "the page lacks {want}");
    }
    assert!(page.matches("<tr><td>").count() >= 5, "{page}");
}

/// A decoy over ssh: nginx's `keepalive_requests` where worker_connections is the
/// limit; judged by throughput, reverted, the file byte-identical on the server's side
/// (and no backup left there), the server serving; the page says reverted.
#[test]
fn a_decoy_over_ssh_is_reverted_byte_identical() {
    if !ssh_ready() {
        return;
    }
    let (code, out, err, run) = lab_tune(
        "worker-connections",
        &[
            "--watch-ssh",
            "-d",
            "1s",
            "--objective",
            "throughput",
            "--try",
            "keepalive_requests 999999",
        ],
    );
    let run = run.unwrap_or_else(|| panic!("no JSON; stdout:\n{out}\nstderr:\n{err}"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(step(&run)["decision"], "reverted", "{out}");
    assert!(
        out.contains("nginx.conf byte-identical to the original"),
        "{out}"
    );
    assert!(!out.contains(" changed\n"), "{out}");
    assert!(!err.contains("its original is kept"), "{err}");
    assert!(
        out.contains("lab: the server serves") && out.contains("(status 200)"),
        "{out}"
    );
    let page = html_of(&run);
    assert!(page.contains("data-decision=\"reverted\""), "{page}");
    assert!(page.contains("No change kept"), "{page}");
}
